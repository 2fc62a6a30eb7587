"""Progress lines from deep inside a build (a calibration that runs for minutes), to whoever is listening.

The engine provider listens around each build (:func:`listening`) and prints the lines on the
terminal; code below it (the explicit calibration) only calls :func:`report`, which does nothing
when no one listens (a script, a test calling the calibration directly).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

_LISTENER: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar("pytest_trt_progress",
                                                                                         default=None)

__all__ = ["listening", "report"]


@contextlib.contextmanager
def listening(listener: Callable[[str], None] | None) -> Iterator[None]:
    """Send the :func:`report` lines of the block to ``listener`` (None: to no one)."""
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


def report(text: str) -> None:
    """One progress line, to the current listener if any."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(text)
