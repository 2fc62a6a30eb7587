"""File helpers, one copy each: atomic writes, directory replace, one file lock, file sha256.

Atomic means a reader sees the old file (or folder) or the complete new one,
never a partial one: everything is written to a temporary sibling and renamed
into place, which is atomic within one folder on POSIX and Windows.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
import shutil
import tempfile
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
                 fsync: bool = True) -> None:
    """Write ``path`` through a temporary file in the same folder (fsynced), then ``os.replace``.

    Also safe when several pytest-xdist workers write the same path: the last
    complete file wins and nobody sees a torn one.  With ``fsync`` the folder is
    fsynced after the rename too, so the new name survives a power cut (~0.3 ms).
    ``fsync=False`` for files that only cache facts and are checked when read (a
    power cut may leave them torn or undo the rename).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer's pid in the name: remove_dead_temporaries finds what a killed writer left
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
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


def remove_dead_temporaries(path: Path) -> list[Path]:
    """Delete ``.<name>.<pid>.<rand>.tmp`` files of :func:`write_atomic` whose writer process is gone; return them.

    A writer killed before its rename leaves its temporary file behind; the pid in the name tells whether it is
    still writing (run it on the host of the writers, best under ``path``'s lock).
    """
    removed = []
    head = f".{path.name}."
    for tmp in path.parent.glob(f"{glob.escape(head)}*.tmp"):
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


def acquire_lock(lock_file: Path, *, what: str, timeout: float = LOCK_TIMEOUT_S) -> HeldLock:
    """Take the exclusive lock ``lock_file`` across processes and threads; return it held.

    ``what`` names the locked object in the timeout error (``"golden file x.h5"``).
    Not thread-local: another thread may release it (the engine cache's writer thread does).
    Raises :class:`~pytest_trt.errors.LockTimeout` after ``timeout`` seconds and ``OSError``
    when the lock file cannot be created.
    """
    from filelock import FileLock, Timeout  # not at plugin load

    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file), timeout=timeout, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeout(
            f"could not lock {what} within {timeout:g} s: another process holds {lock_file}; "
            "if none does (a killed run), delete that file and run again",
            what=what, lock_file=str(lock_file), timeout=timeout,
        ) from None
    return lock


@contextmanager
def locked(lock_file: Path, *, what: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """:func:`acquire_lock` as a context manager."""
    held = acquire_lock(lock_file, what=what, timeout=timeout)
    try:
        yield
    finally:
        held.release()


#: a file's identity: (absolute path, size, mtime_ns, ctime_ns, inode)
FileKey = tuple[str, int, int, int, int]
#: sha256 of files already hashed, by (path, size, mtime, ctime, inode): a cache key and a golden
#: check each need the ONNX file's hash, and a 14 MB model takes ~10 ms per hash.
#: ctime changes on every write and cannot be set back by ``os.utime``, so an edited file is rehashed.
_SHA256_MEMO: dict[tuple[str, int, int, int, int], str] = {}
#: hashes started early on another core (:func:`prefetch_sha256`), by the identity the file had then
_PENDING: dict[FileKey, Future[tuple[str, bool]]] = {}


def stat_identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """A file's identity in stat result ``st``: (size, mtime_ns, ctime_ns, inode); ctime changes on every write
    and cannot be set back, the inode on a rename over the file."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def file_identity(path: Path | str, st: os.stat_result) -> FileKey:
    """The memo key of ``path`` with stat result ``st``: (absolute path, size, mtime_ns, ctime_ns, inode)."""
    return (os.path.abspath(path), *stat_identity(st))


def _hash_stable(path: Path | str, key: FileKey) -> tuple[str, bool]:
    """(sha256, whether the file kept identity ``key`` from before its first byte was read to after its last)."""
    with open(path, "rb") as fh:
        stable = file_identity(path, os.fstat(fh.fileno())) == key
        digest = _sha256_of(fh)
        stable = stable and file_identity(path, os.fstat(fh.fileno())) == key
    return digest, stable


def _sha256_of(fh: Any) -> str:
    """sha256 hex of what is left to read in ``fh``, read in 1 MiB blocks."""
    h = hashlib.sha256()
    while block := fh.read(1 << 20):
        h.update(block)
    return h.hexdigest()


def prefetch_sha256(path: Path | str) -> bool:
    """Start hashing ``path`` on another core (hashlib releases the GIL); :func:`sha256_file` with ``memo`` waits
    for it.  The hash also brings the file into the page cache, so the reader that follows reads memory.

    Its result is used only while the file keeps the identity (path, size, mtime, ctime, inode) it had before the
    hash read its first byte and after it read its last; otherwise the file is hashed again where it is needed.
    Never raises: False when nothing was started (no such file, or hashed already: True then too).
    """
    try:
        key = file_identity(path, os.stat(path))
    except OSError:
        return False
    if key in _SHA256_MEMO or key in _PENDING:
        return True
    future: Future[tuple[str, bool]] = Future()
    if len(_PENDING) > 64:  # prefetched and never asked for: drop them (waiting on them is never needed)
        _PENDING.clear()
    _PENDING[key] = future
    try:
        on_thread("sha256-prefetch", (future, lambda: _hash_stable(path, key)))
    except Exception:  # noqa: BLE001 - an early hash is an optimisation: the reader hashes in line instead
        _PENDING.pop(key, None)
        return False
    return True


def sha256_file(path: Path | str, *, memo: bool = False, stamped: bool = False) -> str:
    """sha256 hex of a file's bytes, read in 1 MiB blocks.

    With ``memo``, a file whose path, size, mtime, ctime and inode are unchanged is not read again, and a hash
    :func:`prefetch_sha256` started for the file as it is now is waited for instead of hashing it again.
    With ``stamped`` too, the digest is also kept across processes in the folder :func:`set_stamp_folder`
    named (see :func:`read_stamp`): the next session, or another xdist worker, reads it instead of hashing.
    """
    key: FileKey | None = None
    if memo:
        key = file_identity(path, os.stat(path))
        known = _SHA256_MEMO.get(key)
        if known is not None:
            return known
        if stamped and (known := read_stamp(key)) is not None:
            _remember(key, known)
            return known
        pending = _PENDING.pop(key, None)
        if pending is not None:
            try:
                digest, stable = pending.result()
            except Exception:  # noqa: BLE001 - the early hash failed (or ran in a forked parent): hash here
                stable = False
            if stable:
                _remember(key, digest)
                return digest
    if key is None:
        with open(path, "rb") as fh:
            return _sha256_of(fh)
    started = time.time_ns()
    digest, stable = _hash_stable(path, key)
    if not stable:  # changed while it was read: this digest belongs to no identity; hash what is there now
        return sha256_file(path)
    _remember(key, digest)
    if stamped:
        write_stamp(key, digest, hashed_at=started)
    return digest


#: where :func:`sha256_file` keeps its stamps across processes (None: nowhere)
_STAMP_FOLDER: list[Path | None] = [None]
#: a file changed less than this long before it was hashed gets no stamp: file times tick coarsely (a few ms), so
#: a rewrite of the same size within one tick would keep the identity; a second later it cannot
STAMP_SETTLE_NS = 1_000_000_000


def set_stamp_folder(folder: Path | None) -> None:
    """Keep :func:`sha256_file` stamps (``stamped=True``) in ``folder`` (an engine cache's ``identity/``)."""
    _STAMP_FOLDER[0] = None if folder is None else Path(folder)


def _stamp_path(key: FileKey) -> Path | None:
    folder = _STAMP_FOLDER[0]
    if folder is None:
        return None
    return folder / hashlib.sha256(key[0].encode("utf-8", "surrogateescape")).hexdigest()  # one stamp per path


def read_stamp(key: FileKey, at: Path | None = None) -> str | None:
    """The sha256 a stamp records for the file of identity ``key`` (:func:`file_identity`), or None.

    ``at``: the stamp's own path (default: in the folder :func:`set_stamp_folder` named, one per file path).

    A stamp is a cache, not evidence: one line naming the identity (path, size, mtime_ns, ctime_ns, inode) and
    the digest, honoured only while the file's identity is exactly that; a write to the file changes its ctime
    (which ``os.utime`` cannot set back), a replacement its inode.  One stamp per path: a new digest replaces it.
    """
    path = at or _stamp_path(key)
    if path is None:
        return None
    try:
        stamp = json.loads(path.read_bytes())
        if stamp["identity"] == list(key) and isinstance(stamp["sha256"], str) and len(stamp["sha256"]) == 64:
            return str(stamp["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def write_stamp(key: FileKey, digest: str, *, hashed_at: int, at: Path | None = None) -> bool:
    """Record ``digest`` for the file of identity ``key``, read from ``hashed_at`` (``time.time_ns()``) on;
    best effort, no fsync (a lost stamp costs one hash).  Not written for a file that changed less than
    :data:`STAMP_SETTLE_NS` before it was read.  True when written."""
    path = at or _stamp_path(key)
    if path is None or hashed_at - max(key[2], key[3]) < STAMP_SETTLE_NS:
        return False
    try:
        write_text_atomic(path, json.dumps({"identity": list(key), "sha256": digest}) + "\n", fsync=False)
    except OSError:
        return False
    return True


def known_sha256(key: FileKey) -> str | None:
    """The sha256 made of the file of identity ``key`` in this process, if any."""
    return _SHA256_MEMO.get(key)


def remember_sha256(key: FileKey, digest: str) -> None:
    """Record ``digest`` as the sha256 of the file of identity ``key`` (:func:`file_identity`), made by a caller that
    read every byte of it (a golden's blocks checked against the digests of its approval)."""
    _remember(key, digest)


def _remember(key: FileKey, digest: str) -> None:
    if len(_SHA256_MEMO) > 4096:  # a session hashes a few models; never grow without bound
        _SHA256_MEMO.clear()
    _SHA256_MEMO[key] = digest
