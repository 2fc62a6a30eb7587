"""Which engines the running test uses, for module-level assertions like ``assert_no_fusion(...)``."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING

from pytest_trt.errors import AssertionContextError

if TYPE_CHECKING:
    from pytest_trt.buildlog.registry import HasRecord

# typed by what the assertions need of an engine (a record and a label): Engine imports this module
_CURRENT: ContextVar[Sequence[HasRecord] | None] = ContextVar("pytest_trt_current_engines", default=None)


def begin_test(engines: Sequence[HasRecord]) -> object:
    """Make ``engines`` (a list the fixtures append to) the current test's; returns a reset token."""
    return _CURRENT.set(engines)


def end_test(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]


def current_engine(engine: HasRecord | None = None) -> HasRecord:
    """``engine`` if given, else the one engine the current test uses."""
    if engine is not None:
        return engine
    engines = _CURRENT.get()
    if not engines:
        raise AssertionContextError(
            "no engine in this test: use the trt_engine or trt_build fixture first, or pass engine=..."
        )
    unique = list(dict.fromkeys(engines))
    if len(unique) > 1:
        labels = ", ".join(e.label for e in unique)
        raise AssertionContextError(f"this test uses {len(unique)} engines ({labels}): pass engine=... to choose one")
    return unique[0]


def in_test() -> bool:
    """Whether a pytest test (with the plugin's call wrapper) is running in this context."""
    return _CURRENT.get() is not None
