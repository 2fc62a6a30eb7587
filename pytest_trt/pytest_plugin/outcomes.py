"""What a :class:`~pytest_trt.errors.TrtError` means for a test: the pytest layer's one skip / fail / usage policy.

Callers raise the outcome after their ``except`` block has ended, so the report shows the
message, not a traceback chained to the plugin's frames.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

from pytest_trt.errors import EngineNotBuilt, EngineNotRunnable, TrtError


def raise_outcome(exc: TrtError, *, optional: bool = False, configure: bool = False) -> NoReturn:
    """Skip, fail (``pytrace=False``) or stop the run for ``exc``.

    ``configure``: the error is in the run's options: a usage error, before any test.  ``optional``: a
    fixture of a tool the test may lack (the backend object, the reference runner): a skip with the reason.
    Otherwise an engine that is not built (no ``--trt-engine-build``) or that this machine cannot execute
    skips, and every other error fails with its message, which says what to do.
    """
    __tracebackhide__ = True
    if configure:
        raise pytest.UsageError(exc.message)
    if optional or isinstance(exc, EngineNotBuilt):
        pytest.skip(exc.message)
    if isinstance(exc, EngineNotRunnable):
        # built, but this machine cannot execute it (no GPU, unsupported compute capability):
        # nothing substitutes another backend's outputs
        from pytest_trt.engines.skipping import not_runnable_message

        pytest.skip(not_runnable_message(exc.message or "engine not runnable here", ""))
    pytest.fail(str(exc), pytrace=False)
