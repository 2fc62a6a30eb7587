"""Capture what native code writes to a file descriptor (stderr, by default).

ONNX Runtime's logger writes with C++ streams straight to file descriptor 2,
so ``contextlib.redirect_stderr`` never sees it.  :class:`FdCapture` points
the descriptor at a temporary file for the duration of a ``with`` block and
puts back *whatever the descriptor was before*: under ``pytest --capture=fd``
that is pytest's own temporary file, which must stay in place for pytest's
capture to keep working.

The redirection is process-wide: output of other threads written to the same
descriptor during the block is captured too.  That is why a build holds the
capture only around session creation, and why captures of one descriptor are
serialised by a lock (two threads swapping fd 2 at once would each restore
the other's temporary file).
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import threading
from types import TracebackType
from typing import Any

__all__ = ["FdCapture"]

_LOCKS: dict[int, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock(fd: int) -> threading.RLock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(fd, threading.RLock())


def _flush_c_stdio() -> None:
    # C stdio buffers (printf from native code) must reach the descriptor they
    # were written for before it is switched; fflush(NULL) flushes every stream.
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no libc symbol lookup (Windows)
        pass


class FdCapture:
    """Redirect file descriptor ``fd`` into a temporary file while the block runs.

    ``text`` holds what was captured once the block has exited (also when it
    exits with an exception).  Nothing captured is echoed to the original
    descriptor: the caller keeps it as evidence (the build log).
    """

    def __init__(self, fd: int = 2) -> None:
        self.fd = fd
        self.text = ""
        self._saved: int | None = None
        self._tmp: Any = None  # the temporary file object while capturing
        self._lock: threading.RLock = _lock(fd)

    def _flush_python(self) -> None:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None and stream.fileno() == self.fd:
                    stream.flush()
            except (AttributeError, OSError, ValueError):
                # pytest's sys-level capture replaces sys.stderr with objects
                # that have no real fileno(); they hold nothing for this fd.
                continue

    def __enter__(self) -> FdCapture:
        if self._saved is not None:
            raise RuntimeError("FdCapture is not re-entrant")
        self._lock.acquire()
        try:
            self._redirect()
        except BaseException:
            self._lock.release()
            raise
        return self

    def _redirect(self) -> None:
        self._flush_python()
        _flush_c_stdio()
        self._tmp = tempfile.TemporaryFile(prefix="pytest-trt-fd")
        self._saved = os.dup(self.fd)
        try:
            os.dup2(self._tmp.fileno(), self.fd)
        except OSError:
            os.close(self._saved)
            self._saved = None
            self._tmp.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._saved is not None and self._tmp is not None
        self._flush_python()
        _flush_c_stdio()
        try:
            os.dup2(self._saved, self.fd)
        finally:
            os.close(self._saved)
            self._saved = None
            self._lock.release()
        tmp, self._tmp = self._tmp, None
        with tmp:
            tmp.seek(0)
            self.text = tmp.read().decode("utf-8", errors="replace")
