"""File helpers, one copy each: atomic writes, directory replace, one file lock, file sha256.

Atomic means a reader sees the old file (or folder) or the complete new one,
never a partial one: everything is written to a temporary sibling and renamed
into place, which is atomic within one folder on POSIX and Windows.
"""

from __future__ import annotations

import errno
import glob
import io
import json
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from pytest_trt.common.background import Future, on_thread
from pytest_trt.errors import LockTimeout

#: how long any pytest-trt lock waits (a cache-miss build or a golden update of a large model
#: holds one for minutes); the timeout error names what was locked and the lock file
LOCK_TIMEOUT_S = 3600.0


def write_atomic(path: Path, writer: Callable[[io.BufferedWriter], None], *, mode: int = 0o644,
                 fsync: bool = True, staging: Path | None = None) -> None:
    """Write ``path`` through a temporary file in the same folder (fsynced), then ``os.replace``.

    Also safe when several pytest-xdist workers write the same path: the last
    complete file wins and nobody sees a torn one.  With ``fsync`` the folder is
    fsynced after the rename too, so the new name survives a power cut (~0.3 ms).
    ``fsync=False`` for files that only cache facts and are checked when read (a
    power cut may leave them torn or undo the rename).  ``staging``: a folder of the
    same file system for the temporary file instead of ``path``'s (made if missing).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if staging is not None:
        staging.mkdir(exist_ok=True, mode=path.parent.stat().st_mode & 0o7777)
    # the writer's pid in the name: remove_dead_temporaries finds what a killed writer left
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=staging or path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            writer(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if fsync:
        fsync_path(path.parent)  # the rename itself reaches the disk


def remove_dead_temporaries(path: Path, *, staging: Path | None = None) -> list[Path]:
    """Delete ``.<name>.<pid>.<rand>.tmp`` files of :func:`write_atomic` whose writer process is gone; return them.

    A writer killed before its rename leaves its temporary file behind; the pid in the name tells whether it is
    still writing (run it on the host of the writers, best under ``path``'s lock).  ``staging``: where
    :func:`write_atomic` made them (default: ``path``'s folder, all of which is listed).
    """
    removed = []
    head = f".{path.name}."
    folder = staging or path.parent
    for tmp in folder.glob(f"{glob.escape(head)}*.tmp") if folder.is_dir() else ():
        pid = tmp.name[len(head):-len(".tmp")].split(".")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_bytes_atomic(path: Path, data: bytes, *, mode: int = 0o644, fsync: bool = True) -> None:
    def write(fh: io.BufferedWriter) -> None:
        fh.write(data)

    write_atomic(path, write, mode=mode, fsync=fsync)


def write_text_atomic(path: Path, text: str, *, mode: int = 0o644, fsync: bool = True) -> None:
    """``text`` as UTF-8, atomically."""
    write_bytes_atomic(path, text.encode("utf-8"), mode=mode, fsync=fsync)


def write_json_atomic(path: Path, data: Any, *, indent: int | None = None, mode: int = 0o644,
                      fsync: bool = True) -> None:
    """``data`` as JSON with sorted keys and a final newline, atomically."""
    text = json.dumps(data, indent=indent, sort_keys=True, separators=None if indent else (",", ":"))
    write_text_atomic(path, text + "\n", mode=mode, fsync=fsync)


def replace_directory(target: Path, fill: Callable[[Path], None], *, staging: Path | None = None,
                      keep_replaced_in: Path | None = None) -> None:
    """Write a folder with ``fill(tmp)`` into a temporary folder, then rename it to ``target``.

    ``staging`` (default: ``target``'s parent) holds the temporary folder, named
    ``.<target name>.<pid>.<random>``: the pid tells a cleaner whether its writer still runs.
    An existing ``target`` is renamed away first and deleted after, or, with ``keep_replaced_in``,
    renamed to ``keep_replaced_in / target.name`` (a folder already there is deleted first).  When another process
    put a complete ``target`` in place in between, that one is kept.
    """
    staging = target.parent if staging is None else staging
    staging.mkdir(parents=True, exist_ok=True)
    tmp = staging / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        fill(tmp)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            doomed = staging / f".{target.name}.replaced.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            os.replace(target, doomed)
            if keep_replaced_in is not None:
                _set_aside(doomed, keep_replaced_in / target.name, staging)
            shutil.rmtree(doomed, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            # a racing writer renamed its complete folder in between: keep it
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _set_aside(folder: Path, keep: Path, staging: Path) -> None:
    """Rename ``folder`` to ``keep``, deleting an older folder there first (never left half-deleted at ``keep``)."""
    keep.parent.mkdir(parents=True, exist_ok=True)
    if keep.exists():
        older = staging / f".{keep.name}.older.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        os.replace(keep, older)
        shutil.rmtree(older, ignore_errors=True)
    os.replace(folder, keep)


@contextmanager
def edited_copy(path: Path, *, before_replace: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield ``.<name>.tmp-<pid>``, a copy of ``path`` to change (none made when ``path`` does not exist).

    On a clean exit the copy is fsynced and renamed over ``path``, then the folder is fsynced;
    on an exception (or a kill) it is removed and ``path`` is left as it was.  For files with no
    transactions of their own (HDF5); readers holding the old file keep reading the old inode.
    Hold ``path``'s lock around it: copies of ``path`` left by any earlier writer, and of other
    files in the folder by writers no longer running, are deleted first.
    """
    for stale in path.parent.glob(f".{path.name}.tmp-*"):
        stale.unlink(missing_ok=True)
    for other in path.parent.glob(".*.tmp-*"):
        pid = other.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            other.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if path.exists():
            shutil.copyfile(path, tmp)
        yield tmp
        fsync_path(tmp)
        if before_replace is not None:
            before_replace(tmp)
        os.replace(tmp, path)
        fsync_path(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a temporary file named for a dead writer's pid can be removed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def fsync_path(path: Path) -> None:
    """fsync a file, or a folder so that a rename in it reaches the disk (else a power cut can undo it).

    A folder's fsync is best effort: POSIX only, and some network file systems refuse it (EINVAL); the
    files in it are fsynced by then.  A file's failing fsync raises: the write did not reach the disk.
    """
    folder = path.is_dir()
    if folder and os.name != "posix":
        return
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        if not folder:
            raise


class HeldLock(Protocol):
    def release(self) -> None: ...


#: locks by flock(2) itself (POSIX); else filelock's
_FLOCK = os.name == "posix"
#: errors of flock(2) on a file system that has no such locks (some network file systems): filelock's soft lock then
_NO_FLOCK = frozenset({errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK, errno.EINVAL})
#: the locks this process holds by flock: a forked child closes its copies (else the parent's release would not
#: free the lock while the child lives: a flock belongs to the open file, which the child shares)
_HELD: set[_Flock] = set()


#: one release at a time: a descriptor closed twice could be another file's by then
_RELEASING = threading.Lock()


class _Busy(Exception):
    """Another holder kept the lock until the deadline (never an OSError: a file system's own ETIMEDOUT is not this)."""


class _Flock:
    """An exclusive flock(2) held on an open descriptor of the lock file; released by closing it, from any thread."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        _HELD.add(self)

    def release(self) -> None:
        with _RELEASING:
            fd, self._fd = self._fd, -1
            _HELD.discard(self)
        if fd >= 0:
            os.close(fd)


def _close_inherited_locks() -> None:
    """In a forked child (one thread, whatever locks the parent's other threads held): close the copies."""
    for held in list(_HELD):
        fd, held._fd = held._fd, -1
        if fd >= 0:
            os.close(fd)  # the child's copy of the descriptor: the parent's lock stays held
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_inherited_locks)


def _flock(lock_file: Path, deadline: float) -> HeldLock | None:
    """The lock by flock(2) itself (POSIX), polled until ``deadline`` (``time.monotonic``); None where the file
    system has no flock.  Raises _Busy at the deadline."""
    import fcntl

    # not inherited by programs this process starts; a symbolic link is refused, as filelock refuses it
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    pause, held = 0.001, None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = _Flock(fd)
                return held
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _Busy from None
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
            except OSError as exc:
                if exc.errno in _NO_FLOCK:
                    return None
                raise
    finally:
        if held is None:
            os.close(fd)


def acquire_lock(lock_file: Path, *, what: str, timeout: float = LOCK_TIMEOUT_S) -> HeldLock:
    """Take the exclusive lock ``lock_file`` across processes and threads; return it held.

    ``what`` names the locked object in the timeout error (``"golden file x.h5"``).
    Not thread-local: another thread may release it (the engine cache's writer thread does).
    Raises :class:`~pytest_trt.errors.LockTimeout` after ``timeout`` seconds and ``OSError``
    when the lock file cannot be created.  On POSIX the lock is flock(2) on the lock file, the lock filelock takes
    there, without its probe of the folder (a file made and removed for every lock); where the file system has no
    flock, and on Windows, filelock's own lock.
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        if _FLOCK:
            held = _flock(lock_file, time.monotonic() + timeout)
            if held is not None:
                return held
        from filelock import FileLock, Timeout  # not at plugin load

        lock = FileLock(str(lock_file), timeout=timeout, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            raise _Busy from None
        return lock
    except _Busy:
        raise LockTimeout(
            f"could not lock {what} within {timeout:g} s: another process holds {lock_file}; "
            "if none does (a killed run), delete that file and run again",
            what=what, lock_file=str(lock_file), timeout=timeout,
        ) from None


@contextmanager
def locked(lock_file: Path, *, what: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """:func:`acquire_lock` as a context manager."""
    held = acquire_lock(lock_file, what=what, timeout=timeout)
    try:
        yield
    finally:
        held.release()


def write_plain(path: Path, data: bytes | memoryview, *, thread: str | None = None) -> Future[None]:
    """Write ``data`` to a new file ``path`` (no fsync: the caller renames its folder into place), on a thread named
    ``thread`` when one is named (the write releases the GIL: 103 MB take ~25 ms); wait for the future, whose result
    raises the write's error."""
    done: Future[None] = Future()
    if thread is not None:
        on_thread(thread, (done, lambda: _write_new(path, data)))
    else:
        done.run(lambda: _write_new(path, data))
    return done


def _write_new(path: Path, data: bytes | memoryview) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
