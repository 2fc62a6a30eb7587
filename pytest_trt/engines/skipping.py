"""Skips for engines this machine cannot execute, reported at the user's test line.

pytest reports a skip at the last traceback entry not hidden by
``__tracebackhide__``.  Every frame between the user's test and
:func:`skip_here` hides itself, so ``-rs`` shows ``test_model.py:12``, the
line that called ``trt_golden.check`` or ``trt_engine.run``, not a plugin file.
"""

from __future__ import annotations

from typing import NoReturn


def not_runnable_message(reason: str, backend: str) -> str:
    """The backend's own reason, plus how to run engines on this machine."""
    from pytest_trt.backends.registry import cpu_backend

    cpu = cpu_backend()  # the backend that executes engines on any CPU
    if cpu is None or backend == cpu:
        return reason
    return f"{reason}. Hint: --trt-backend {cpu} runs engines on this CPU"


def skip_here(message: str) -> NoReturn:
    """``pytest.skip(message)``, located at the first caller frame that does not hide itself."""
    __tracebackhide__ = True
    import pytest

    pytest.skip(message)
