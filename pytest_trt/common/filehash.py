"""File hashes, one copy each: a file's identity, its sha256 (memoised, prefetched, stamped across processes),
and the sha256 of an engine's bytes on a thread.

A stamp or a memo is a cache of a verification, not evidence: it is honoured only while the file keeps the
identity (path, size, mtime_ns, ctime_ns, inode) it had when its bytes were hashed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.fileio import write_text_atomic
from pytest_trt.errors import CacheCorrupt

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


def sha256_and_size(path: Path | str) -> tuple[str, int]:
    """sha256 hex and size of one file, both through one open handle: a file renamed over ``path`` meanwhile
    cannot pair one file's digest with the other's size."""
    with open(path, "rb") as fh:
        return _sha256_of(fh), os.fstat(fh.fileno()).st_size


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


#: how long a build waits for its engine's hash thread to begin (~0.1 ms with a free core; with none, not 5 ms)
BUILD_HASH_START_WAIT_S = 0.001

#: engines at least this large are hashed on a thread while the entry's other files are read; a smaller
#: one (0.5 MB: 0.3 ms) costs less to hash inline than a thread costs to start and join
HASH_THREAD_BYTES = 4 << 20


class EngineDigest:
    """The sha256 of an engine's bytes, computed on a thread from the moment the build returns.

    hashlib releases the GIL, so a 14.7 MB engine (~7 ms) is hashed while the log is converted and
    the cache entry's files are written; :meth:`hexdigest` waits for it.  The thread is started
    without waiting for it to run (:func:`pytest_trt.common.background.on_thread`).
    """

    def __init__(self, engine: bytes | memoryview, *, wait_start: float = 0.0, thread: str = "engine-sha256") -> None:
        """``wait_start``: seconds to wait at most for the thread to begin, for a caller that goes on holding the
        GIL (a build returning its result and starting the cache writer): else the hash begins only when the caller
        releases it, or after the interpreter's 5 ms switch interval.  ``thread``: the thread's name."""
        self._engine = engine  # a memoryview keeps the buffer it views (the builder's) alive until hashed
        self._future: Future[str] = Future()
        on_thread(thread, (self._future, self._hash), wait_start=wait_start)

    def _hash(self) -> str:
        digest = hashlib.sha256(self._engine).hexdigest()
        self._engine = b""  # hashed: the builder's buffer may go (kept on failure, for hexdigest to hash it there)
        return digest

    def hexdigest(self) -> str:
        try:
            return self._future.result()
        except Exception:  # only a MemoryError on the thread: hash here rather than give no digest
            return hashlib.sha256(self._engine).hexdigest()


def read_with_identity(path: Path) -> tuple[bytes, FileKey | None]:
    """The file's bytes, and its identity when it kept the same one from before the read to after it."""
    with open(path, "rb") as fh:
        before = file_identity(path, os.fstat(fh.fileno()))
        data = fh.read()
        after = file_identity(path, os.fstat(fh.fileno()))
    return data, (after if after == before else None)


class StampedRead:
    """A file and its sha256: the stamp's while the file keeps the identity the stamp names, else read and hashed
    (on a thread from the read on, for a large file); :meth:`stamp` keeps a verified digest for the next reader.

    A stamped file is not read until :meth:`data` is first asked for; that read checks the file still has the
    stamped identity (else its bytes must hash to the stamped digest) and raises ValueError naming it if not.
    """

    def __init__(self, path: Path, *, stamp: Path, thread: str = "engine-sha256") -> None:
        """``thread``: the name of the thread that hashes a large file read now (tests count them by name)."""
        self.path = path
        self._thread = thread
        self._started = time.time_ns()
        self._stamp_path = stamp
        self._data: bytes | None = None
        self._identity: FileKey | None = file_identity(path, os.stat(path))
        self._stamped = read_stamp(self._identity, at=stamp)
        self._pending: EngineDigest | None = None
        if self._stamped is None:  # read now, and hash from now on
            self._data, self._identity = read_with_identity(path)
            if len(self._data) >= HASH_THREAD_BYTES:
                self._pending = EngineDigest(self._data, thread=self._thread)
        self._digest: str | None = None

    @property
    def loaded(self) -> bool:
        return self._data is not None

    def data(self) -> bytes:
        """The file's bytes: for a stamped file, read now and checked against the stamp."""
        if self._data is None:
            data, identity = read_with_identity(self.path)
            if identity != self._identity and hashlib.sha256(data).hexdigest() != self._stamped:
                raise ValueError(f"{self.path} changed after it was verified (sha256 {self._stamped}): it is not "
                                 "the file that was checked")
            self._data = data
        return self._data

    def checked_data(self, what: str) -> bytes:
        """:meth:`data` of a cache file: CacheCorrupt naming ``what`` and the file when it changed since it was verified
        (or cannot be read)."""
        try:
            return self.data()
        except (OSError, ValueError) as exc:
            raise CacheCorrupt(f"cached {what} {self.path}: {exc}; rebuild it (pytest --trt-engine-build "
                               "--trt-rebuild)", path=str(self.path)) from None

    def release(self) -> None:
        """Let go of a stamped file's bytes (:meth:`data` reads and checks them again when asked)."""
        if self._stamped is not None:
            self._data = None

    def hexdigest(self) -> str:
        if self._digest is None:
            if self._stamped is not None:
                self._digest = self._stamped
            elif self._pending is not None:
                self._digest = self._pending.hexdigest()
            else:
                self._digest = hashlib.sha256(self.data()).hexdigest()
        return self._digest

    def stamp(self) -> None:
        """Record the digest, which the caller checked, for the next reader (not when it came from the stamp)."""
        if self._stamped is None and self._identity is not None:
            write_stamp(self._identity, self.hexdigest(), hashed_at=self._started, at=self._stamp_path)
