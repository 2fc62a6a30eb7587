"""Work for another core: a :class:`Future` made on a thread that is started without waiting for it.

GIL-free work runs beside the work that holds the GIL: the engine's sha256 after a build or a cache read
(``filehash.EngineDigest``), the cache entry's writer (``session.EngineProvider``), and the bundle writer's
log gzip, engine CRC-32 and file sha256 (``audit.bundle``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Future(Generic[T]):
    """A value made on another thread (:func:`on_thread`); :meth:`result` waits for it and re-raises its error."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._out: list[T] = []
        self._error: list[BaseException] = []
        self._pid = os.getpid()  # a forked child inherits the future, never the thread making its value

    def run(self, fn: Callable[[], T]) -> None:
        try:
            self._out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the waiting thread by result()
            self._error.append(exc)
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        """Wait until the value is made or failed, raising nothing (:meth:`result` gives it)."""
        if os.getpid() == self._pid:
            self._done.wait()

    def result(self) -> T:
        """The value (waits for it); raises RuntimeError in a forked child whose parent was still making it."""
        if not self._done.is_set() and os.getpid() != self._pid:
            raise RuntimeError("this value was being made by a thread of the parent process, which a forked child "
                               "does not have: it will never be ready here")
        self._done.wait()
        if self._error:
            raise self._error[0]
        return self._out[0]


def on_thread(name: str, *steps: tuple[Future[Any], Callable[[], Any]], wait_start: float = 0.0,
              inline: bool = True) -> bool:
    """Make each step's value, in order, on one new thread (for hashlib and zlib calls, which release the GIL).

    Started with :func:`_thread.start_new_thread`, which returns at once: ``threading.Thread.start``
    waits until the new thread runs, and on the shared 2-core machine, with both cores busy, that wait
    cost the bundle's critical path up to 4 ms per thread.  ``wait_start``: seconds to wait at most for
    the thread to begin (the caller then lets it take the GIL, so its first GIL-free call starts now
    rather than whenever the caller next releases the GIL).  ``name`` names the work (tests count it).
    When no thread can be started, the steps are made here, or with ``inline=False`` (work that runs until the
    caller stops it) not at all.  True when a thread makes them.
    """
    import _thread

    started = threading.Event()

    def run() -> None:
        started.set()
        for future, fn in steps:
            future.run(fn)

    try:
        _thread.start_new_thread(run, ())
    except RuntimeError:  # "can't start new thread" (a process at its thread limit): the work is done here
        if inline:
            run()
        return False
    if wait_start > 0:
        started.wait(wait_start)
    return True
