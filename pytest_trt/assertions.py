"""Module-level assertions defaulting to the current test's engine.

``assert_no_fusion("block1/conv_dw", "block1/relu6")`` checks the one engine
the running test uses; ``engine=`` picks another.  Each delegates to the
:class:`~pytest_trt.engine.Engine` method of the same name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_trt.current import current_engine

if TYPE_CHECKING:
    from pytest_trt.engine import Engine


def assert_fused(*nodes: str, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_fused(*nodes)


def assert_no_fusion(*nodes: str, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_no_fusion(*nodes)


def assert_precision(node: str, dtype: str, *, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_precision(node, dtype)


def assert_layer_count(*, min: int | None = None, max: int | None = None, engine: Engine | None = None) -> None:  # noqa: A002
    __tracebackhide__ = True
    current_engine(engine).assert_layer_count(min=min, max=max)


def assert_warning(pattern: str, *, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_warning(pattern)


def assert_no_warning(pattern: str, *, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_no_warning(pattern)


def assert_calibration(algorithm: str, *, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_calibration(algorithm)


def assert_dynamic_range(
    tensor: str, *, max_abs: float | None = None, min_abs: float | None = None, engine: Engine | None = None
) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_dynamic_range(tensor, max_abs=max_abs, min_abs=min_abs)


def assert_int8(*nodes: str, engine: Engine | None = None) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_int8(*nodes)


def assert_calibration_coverage(
    *, min_per_class: int, classes: Iterable[int] | None = None, engine: Engine | None = None
) -> None:
    __tracebackhide__ = True
    current_engine(engine).assert_calibration_coverage(min_per_class=min_per_class, classes=classes)
