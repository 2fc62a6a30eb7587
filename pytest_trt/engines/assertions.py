"""The generated forms of the build-record assertions: ``Engine`` methods and module-level functions.

Every assertion is defined once, on a :class:`~pytest_trt.buildlog.record.BuildRecord`, in
:mod:`pytest_trt.buildlog.assertions` or :mod:`pytest_trt.buildlog.calibration_assertions`
(``@record_assertion``, :mod:`pytest_trt.buildlog.registry`).  This module only binds its two
other forms, one line each, with signatures mypy derives from the definition:

* :class:`EngineAssertions` (``Engine`` inherits it): ``trt_engine.assert_no_fusion(...)``;
* module-level functions: ``assert_no_fusion("block1/conv_dw", "block1/relu6")`` checks the one
  engine the running test uses; ``engine=`` picks another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec

from pytest_trt.buildlog import assertions as _checks
from pytest_trt.buildlog import calibration_assertions as _calibration
from pytest_trt.buildlog.registry import REGISTRY, engine_method, present
from pytest_trt.engines.current import current_engine

if TYPE_CHECKING:
    from pytest_trt.buildlog.record import BuildRecord

P = ParamSpec("P")


def current_engine_function(fn: Callable[Concatenate[BuildRecord, P], None]) -> Callable[P, None]:
    """The module-level form of ``fn``: checks the current test's engine, or ``engine=``."""

    def function(*args: P.args, **kwargs: P.kwargs) -> None:
        __tracebackhide__ = True
        engine = current_engine(kwargs.pop("engine", None))  # type: ignore[arg-type]
        kwargs.setdefault("label", engine.label)
        fn(engine.record, *args, **kwargs)

    present(function, fn, first=None, keywords=("engine",))
    function.__module__ = __name__
    return function


class EngineAssertions:
    """The record assertions as methods of an object with a ``record`` and a ``label`` (``Engine``)."""

    assert_fused = engine_method(_checks.assert_fused)
    assert_no_fusion = engine_method(_checks.assert_no_fusion)
    assert_precision = engine_method(_checks.assert_precision)
    assert_layer_count = engine_method(_checks.assert_layer_count)
    assert_warning = engine_method(_checks.assert_warning)
    assert_no_warning = engine_method(_checks.assert_no_warning)
    assert_calibration = engine_method(_calibration.assert_calibration)
    assert_dynamic_range = engine_method(_calibration.assert_dynamic_range)
    assert_int8 = engine_method(_calibration.assert_int8)
    assert_calibration_coverage = engine_method(_calibration.assert_calibration_coverage)


assert_fused = current_engine_function(_checks.assert_fused)
assert_no_fusion = current_engine_function(_checks.assert_no_fusion)
assert_precision = current_engine_function(_checks.assert_precision)
assert_layer_count = current_engine_function(_checks.assert_layer_count)
assert_warning = current_engine_function(_checks.assert_warning)
assert_no_warning = current_engine_function(_checks.assert_no_warning)
assert_calibration = current_engine_function(_calibration.assert_calibration)
assert_dynamic_range = current_engine_function(_calibration.assert_dynamic_range)
assert_int8 = current_engine_function(_calibration.assert_int8)
assert_calibration_coverage = current_engine_function(_calibration.assert_calibration_coverage)


def unbound() -> list[str]:
    """Registered assertions missing a generated form here (the registry test requires none)."""
    return [name for name in REGISTRY
            if not (callable(getattr(EngineAssertions, name, None)) and callable(globals().get(name)))]
