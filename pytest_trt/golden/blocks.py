"""A golden's blocks checked against the digests its approval logged, so h5py is given checked bytes only.

An approved update logs, in its APPROVALS.jsonl line, the sha256 of each :data:`BLOCK_BYTES` block of the file
(:func:`file_digests`, under :data:`BLOCKS_FIELD`).  A check then needs not hash the whole file before h5py opens
it: :class:`BlockVerifier` checks the blocks on another core from when the golden is known, and h5py reads through
:meth:`BlockVerifier.reader`, which serves bytes of checked blocks only.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.filehash import FileKey, file_identity, remember_sha256
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden.approvals import log_path
from pytest_trt.golden.digest_file import mismatch_error

_HEX = re.compile(r"^[0-9a-f]{64}$")
#: the APPROVALS.jsonl field with the sha256 of each BLOCK_BYTES block of the approved file
BLOCKS_FIELD = "file_blocks"
BLOCK_BYTES = 32 << 20
#: a block is read and hashed in pieces of this size through one reused buffer, which stays in the core's cache
#: (a 32 MiB buffer is written by the read and read again by sha256 from main memory: +6 % of a check's hashing)
READ_BYTES = 1 << 20


def file_digests(path: Path) -> tuple[str, dict[str, Any]]:
    """One read of ``path``: its sha256 and the :data:`BLOCKS_FIELD` record (size, block size, each block's sha256)
    that an approval logs, so that a check can give h5py each block as soon as it is checked.

    Every byte is hashed twice (the file's digest and its block's), so the two run side by side: the file's
    digest of each block on another thread while this one hashes the block (hashlib releases the GIL).  With a
    core free the two take the time of one; on a machine whose cores are all busy the time and the CPU are
    those of hashing one after the other (1.03-1.25 s for 1 GiB either way at load average 5, on 2 cores).
    """
    whole = hashlib.sha256()
    blocks: list[str] = []
    size = 0
    buf = bytearray(BLOCK_BYTES)  # one buffer: a fresh 32 MiB bytes per block costs 8,192 page faults each
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := _fill(fh, view):
            block = view[:n]
            done: Future[None] = Future()
            on_thread("golden-file-sha256", (done, lambda: whole.update(block)))  # noqa: B023 - waited for below
            try:
                blocks.append(hashlib.sha256(block).hexdigest())
            finally:
                done.result()  # the buffer is read again only once the file's digest has taken this block
            size += n
    return whole.hexdigest(), {"size": size, "block": BLOCK_BYTES, "sha256": blocks}


def _fill(fh: Any, view: memoryview) -> int:
    """Read into ``view`` until it is full or the file ends (a raw read may return fewer bytes); bytes read."""
    got = 0
    while got < len(view) and (n := fh.readinto(view[got:])):
        got += n
    return got


_TODO, _BUSY, _OK, _BAD = 0, 1, 2, 3


class BlockVerifier:
    """A golden's blocks checked against the digests its approval logged: on another core, in file order, from
    when the golden is known; a reader waits only for the blocks it reads (checking a block itself when no one
    has started it).  h5py reads through :meth:`reader`, which serves bytes of checked blocks only, from the file
    descriptor the blocks were checked on; a block that does not match fails the read, and :meth:`finish`, naming
    the file and the block.  Once every block matched, the file's approved sha256 is remembered for its identity.
    """

    def __init__(self, path: Path, key: FileKey, whole: str, expected: tuple[str, ...], block: int,
                 digests: list[str]) -> None:
        self.path, self.key, self.whole, self.expected = path, key, whole, expected
        self.size, self.block, self.digests = key[1], block, digests
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        if file_identity(path, os.fstat(self._fd)) != key:  # replaced between the stat and the open
            os.close(self._fd)
            raise OSError(f"{path} changed while it was opened")
        self._state = bytearray(len(digests))
        self._cond = threading.Condition()
        self._inline = threading.Lock()  # the buffer of the blocks a reader checks itself
        self._inline_buffer: bytearray | None = None
        self._pid = os.getpid()
        self._closed = False
        self._thread: Future[None] | None = None
        #: the first block that did not match: (message, context) of the GoldenCorrupt that :meth:`error` makes
        self.failure: tuple[str, dict[str, Any]] | None = None

    @classmethod
    def of(cls, path: Path, key: FileKey, expected: tuple[str, ...]) -> BlockVerifier | None:
        """The verifier of ``path`` (identity ``key``) from the last APPROVALS.jsonl line of this file that names
        one of the ``expected`` digests and logged blocks for its size; None when there is none."""
        try:
            raw = log_path(path.parent).read_bytes()
        except OSError:
            return None
        found: tuple[str, int, list[str]] | None = None
        for line in raw.split(b"\n"):
            if BLOCKS_FIELD.encode() not in line or path.name.encode() not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            blocks = rec.get(BLOCKS_FIELD)
            if rec.get("file") != path.name or rec.get("file_sha256") not in expected or not isinstance(blocks, dict):
                continue
            size, block, digests = blocks.get("size"), blocks.get("block"), blocks.get("sha256")
            if (isinstance(block, int) and block > 0 and size == key[1] and isinstance(digests, list)
                    and len(digests) == -(-key[1] // block) and all(isinstance(d, str) and _HEX.match(d)
                                                                     for d in digests)):
                found = (str(rec["file_sha256"]), block, [str(d) for d in digests])
        if found is None or not found[2]:
            return None
        return cls(path, key, found[0], expected, found[1], found[2])

    @property
    def usable(self) -> bool:
        """False in a forked child (the parent's thread may hold blocks there) or once closed."""
        return not self._closed and os.getpid() == self._pid

    def start(self) -> bool:
        """Start checking the blocks in order on another core (once)."""
        if self._thread is None:
            self._thread = Future()
            try:
                on_thread("golden-blocks", (self._thread, self._run))
            except Exception:  # noqa: BLE001 - the reader checks each block itself
                self._thread = None
                return False
        return True

    def _run(self) -> None:
        buffer = bytearray(min(READ_BYTES, self.block, self.size))  # one buffer for every piece of every block
        for i in range(len(self.digests)):
            if self._closed or self.failure is not None:
                return
            if self._claim(i):
                self._check(i, buffer)

    def _claim(self, i: int) -> bool:
        with self._cond:
            if self._state[i] != _TODO:
                return False
            self._state[i] = _BUSY
            return True

    def _check(self, i: int, buffer: bytearray | None = None) -> None:
        start = i * self.block
        length = min(self.block, self.size - start)
        try:
            piece = min(READ_BYTES, length)
            buffer = bytearray(piece) if buffer is None or len(buffer) < piece else buffer
            digest = hashlib.sha256()
            done = 0
            with memoryview(buffer)[:piece] as view:
                while done < length and (got := os.preadv(self._fd, [view[: length - done]], start + done)) > 0:
                    digest.update(view[:got])  # a short file ends the loop: its digest then differs
                    done += got
            found = digest.hexdigest()
            ok = found == self.digests[i]
        except OSError as exc:
            ok, found = False, f"unreadable ({exc.strerror})"
        with self._cond:
            self._state[i] = _OK if ok else _BAD
            if not ok and self.failure is None:
                error = mismatch_error(
                    self.path, self.expected, found,
                    where=f" for bytes {i * self.block}-{min(self.size, (i + 1) * self.block)}, whose approved "
                          f"sha256 is {self.digests[i]}")
                self.failure = (error.message, dict(error.context))
            if ok and all(s == _OK for s in self._state):
                remember_sha256(self.key, self.whole)
            self._cond.notify_all()

    def ensure(self, start: int, stop: int) -> None:
        """Return once bytes ``start:stop`` are checked; raise the mismatch when a block (any) failed."""
        for i in range(start // self.block, min(len(self.digests), -(-stop // self.block))):
            while True:
                with self._cond:
                    if self.failure is not None:
                        raise self.error()
                    state = self._state[i]
                    if state == _OK:
                        break
                    if state == _BUSY:
                        self._cond.wait()
                        continue
                    self._state[i] = _BUSY
                with self._inline:  # one buffer for them all: a fresh 1 MiB each is a malloc that may stay resident
                    if self._inline_buffer is None:
                        self._inline_buffer = bytearray(min(READ_BYTES, self.block, self.size))
                    self._check(i, self._inline_buffer)

    def error(self) -> GoldenCorrupt:
        """A new exception for the mismatch (one raised through h5py keeps frames that saw h5py's buffers)."""
        message, context = self.failure or (f"golden file {self.path} could not be checked", {})
        return GoldenCorrupt(message, **context)

    def finish(self) -> None:
        """Check every block not checked yet (the file's bytes all match the approved ones, or this raises)."""
        self.ensure(0, self.size)

    def close(self) -> None:
        """Stop the thread (after the block it is on) and close the file."""
        self._closed = True
        if self._thread is not None and self._pid == os.getpid():
            self._thread.result()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def reader(self) -> io.RawIOBase:
        """A read-only file object for h5py that serves checked bytes only."""
        return _CheckedReader(self)

    def pread_into(self, view: memoryview, offset: int) -> int:
        n = max(0, min(len(view), self.size - offset))
        if n == 0:
            return 0
        self.ensure(offset, offset + n)
        with view[:n] as part:
            return os.preadv(self._fd, [part], offset)


class _CheckedReader(io.RawIOBase):
    def __init__(self, verifier: BlockVerifier) -> None:
        super().__init__()
        self._v = verifier
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._v.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        # h5py frees its buffer after the call: no view of it, and no frame holding it, may outlive the call (an
        # exception raised through h5py keeps its frames, and freeing them after the library is gone crashes)
        try:
            with memoryview(buffer) as whole, whole.cast("B") as view:
                n = self._v.pread_into(view, self._pos)
        except (GoldenCorrupt, OSError):
            n = -1
        if n < 0:
            del buffer
            raise self._v.error()
        self._pos += n
        return n
