"""Atomic file writes: a reader sees the old file or the complete new one, never a partial file."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, writer: Callable[[io.BufferedWriter], None], *, mode: int = 0o644) -> None:
    """Write ``path`` through a temporary file in the same folder (fsynced), then ``os.replace``.

    Also safe when several pytest-xdist workers write the same path: the last
    complete file wins and nobody sees a torn one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    def write(fh: io.BufferedWriter) -> None:
        fh.write(data)

    write_atomic(path, write)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a temporary file named for a dead writer's pid can be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True
