"""The byte streams of one pass over a bundle file (:func:`pytest_trt.audit.tarscan.scan`): the raw file read in
blocks and hashed, its gzip members inflated, and the deterministic writer's output for the members read so far
compared with the file byte for byte (and with the earlier one-member writer's output, for bundles it wrote)."""

from __future__ import annotations

import _thread
import gzip
import hashlib
import os
import threading
import zlib
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, BinaryIO

from pytest_trt.audit.archive import GZIP_LEVEL, STORED_GZIP_HEADER
from pytest_trt.audit.stored_reader import StoredReader
from pytest_trt.common.filehash import HASH_THREAD_BYTES
from pytest_trt.errors import ArchiveError

#: bytes of the raw file read at a time
READ_BLOCK = 1 << 20
#: tar bytes held for the earlier writer's rebuild before it is compressed (see :class:`LegacyRebuild`)
LEGACY_HOLD = 4 << 20


class Comparison:
    """Compares two byte streams fed in any interleaving, holding only the part one side is ahead by.

    The side ahead is queued as the blocks it was fed in, with an offset into the first, so a matching byte is
    compared once and never copied more than once (into a slice no larger than the other side's block).
    """

    def __init__(self) -> None:
        self.queue: deque[bytes] = deque()
        self.head = 0  # bytes of queue[0] already matched
        self.side = 0  # the side whose bytes are queued
        self.matched = 0
        self.first_difference: int | None = None
        self.noticed_at: int | None = None  # tar offset where the reader first saw the difference

    def feed(self, side: int, data: bytes) -> None:
        if self.first_difference is not None or not data:
            return
        queue = self.queue
        if not queue or side == self.side:
            if not queue:
                self.head, self.side = 0, side
            queue.append(data)
            return
        pos, size = 0, len(data)
        while pos < size and queue:
            ahead, start = queue[0], self.head
            n = min(len(ahead) - start, size - pos)
            mine = ahead if start == 0 and n == len(ahead) else ahead[start : start + n]
            theirs = data if pos == 0 and n == size else data[pos : pos + n]
            if mine != theirs:
                self.first_difference = self.matched + next(i for i in range(n) if mine[i] != theirs[i])
                queue.clear()
                return
            self.matched += n
            pos += n
            if start + n == len(ahead):
                queue.popleft()
                self.head = 0
            else:
                self.head = start + n
        if pos < size:
            queue.append(data[pos:])
            self.head, self.side = 0, side

    def stop(self, offset: int) -> None:
        """The streams are known to differ from ``offset`` on (without comparing further)."""
        if self.first_difference is None:
            self.first_difference = offset
            self.queue.clear()

    def finish(self) -> None:
        if self.first_difference is None and self.queue:
            self.first_difference = self.matched


class RawReader:
    """The raw file in 1 MiB blocks: every block is hashed (on another thread: hashlib releases the GIL) and
    compared with the writer's output; the file is read exactly once, in order."""

    def __init__(self, fh: BinaryIO, comparison: Comparison, legacy: Comparison) -> None:
        self.fh = fh
        self.hash = hashlib.sha256()
        self.comparison = comparison
        self.legacy = legacy
        self.size = 0
        self._blocks: SimpleQueue[bytes | None] = SimpleQueue()
        self._done = threading.Event()
        # a thread pays for itself on an engine's bundle; a small one is hashed in line (a thread start costs more)
        self._threaded = os.fstat(fh.fileno()).st_size >= HASH_THREAD_BYTES
        if self._threaded:
            try:
                _thread.start_new_thread(self._hash_blocks, ())
            except RuntimeError:  # a process at its thread limit: hash in line
                self._threaded = False

    def _hash_blocks(self) -> None:
        try:
            while (block := self._blocks.get()) is not None:
                self.hash.update(block)
        finally:
            self._done.set()

    def read(self) -> bytes:
        data = self.fh.read(READ_BLOCK)
        if data:
            self.size += len(data)
            if self._threaded:
                self._blocks.put(data)
            else:
                self.hash.update(data)
            self.comparison.feed(0, data)
            self.legacy.feed(0, data)
        return data

    def drain(self) -> None:
        while self.read():
            pass

    def hexdigest(self) -> str:
        self.close()
        return self.hash.hexdigest()

    def close(self) -> None:
        if self._threaded:
            self._threaded = False
            self._blocks.put(None)
            self._done.wait()


class Inflater:
    """The tar stream inside the raw file's gzip members (one or more), inflated on demand.

    Each gzip member is checked by zlib (wbits 31: header, deflate data, CRC-32 and length); a file that ends
    before a member's trailer is truncated.  ``on_next_member(offset)`` is called when a member is followed by
    another, which starts at ``offset`` of the file.  A stored member announced with :meth:`expect_stored` is read
    by :class:`StoredReader` from the raw bytes when it starts as the writer starts one.
    """

    def __init__(self, raw: RawReader, on_next_member: Callable[[int], None]) -> None:
        self.raw = raw
        self.on_next_member = on_next_member
        self.inflate: Any = zlib.decompressobj(31)  # None between gzip members
        self.direct: StoredReader | None = None  # the gzip member being read from the raw bytes
        self.pending: bytes | memoryview = b""  # raw bytes read and not yet consumed
        self.members = 1
        self._announced = False  # the next gzip member may be a stored one
        self._left = 0  # announced stored bytes not yet returned by zlib (whose CRC-32 is then computed here)
        self._crc = 0  # of the announced bytes returned so far, when zlib inflated them
        self._reader: StoredReader | None = None  # the reader of the announced bytes, when they were read raw

    def expect_stored(self, size: int) -> None:
        """The next ``size`` bytes are a stored member's data and padding (:data:`archive.STORED_MEMBERS`)."""
        self._announced, self._left, self._crc, self._reader = True, size, 0, None

    def stored_crc(self) -> int:
        """The CRC-32 of the bytes returned since :meth:`expect_stored`."""
        return self._reader.crc if self._reader is not None else self._crc

    def _start_member(self) -> bool:
        rest = self.pending or self.raw.read()
        if not rest:
            return False
        self.members += 1
        self.on_next_member(self.raw.size - len(rest))
        while self._announced and len(rest) < len(STORED_GZIP_HEADER) and (more := self.raw.read()):
            rest = bytes(rest) + more  # a gzip header cut by the end of a raw block
        if self._announced and rest[: len(STORED_GZIP_HEADER)] == STORED_GZIP_HEADER:
            self.direct = self._reader = StoredReader(self.raw.read, self._left,
                                                     memoryview(rest)[len(STORED_GZIP_HEADER):])
            self._left = 0  # the reader counts them now
        else:
            self.inflate, self.pending = zlib.decompressobj(31), rest
        self._announced = False
        return True

    def read_some(self, n: int) -> bytes | memoryview:
        """1 to ``n`` bytes (as zlib or the raw blocks give them, without joining), or none at the end of the last
        gzip member."""
        while True:
            out: bytes | memoryview
            if self.direct is not None:
                out = self.direct.read_some(n)
                if out:
                    return out
                self.pending, self.direct = self.direct.leftover, None  # its trailer is checked: the member ended
            elif self.inflate is None or self.inflate.eof:
                if self.inflate is not None:
                    self.pending, self.inflate = self.inflate.unused_data, None
                if not self._start_member():
                    return b""
            else:
                if not self.pending:
                    self.pending = self.raw.read()
                    if not self.pending:
                        raise ArchiveError("the file ends inside a gzip member (truncated file)")
                out = self.inflate.decompress(self.pending, n)
                self.pending = self.inflate.unconsumed_tail
                if out:
                    if self._left:  # announced bytes inside a deflated member: not the writer's layout
                        self._announced = False
                        self._crc = zlib.crc32(out[: self._left], self._crc)
                        self._left = max(0, self._left - len(out))
                    return out

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes: fewer only at the end of the last gzip member."""
        out = self.read_some(n)
        if len(out) == n or not out:
            return bytes(out)
        parts = [out]
        want = n - len(out)
        while want and (more := self.read_some(want)):
            parts.append(more)
            want -= len(more)
        return b"".join(parts)


class LegacyRebuild:
    """The earlier bundle writer (the whole tar in one gzip -1 member), so bundles it wrote still verify.

    That writer wrote one gzip member, so the file can be its output only while its first gzip member goes on.
    The tar bytes are held (up to :data:`LEGACY_HOLD` of them) rather than compressed at once: a current
    bundle's first member ends after its small members, the rebuild is abandoned then, and it cost nothing.
    Past the hold, or at the end of a one-member file, the held bytes are compressed and compared; from then on
    it stops compressing as soon as the file differs from it.
    """

    def __init__(self, comparison: Comparison) -> None:
        self.comparison = comparison
        self.held: list[bytes] | None = []
        self.held_size = 0
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=RebuiltSink(comparison), compresslevel=GZIP_LEVEL,
                                mtime=0)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.comparison.first_difference is not None:
            return
        if self.held is not None:
            self.held.append(bytes(data))
            self.held_size += len(data)
            if self.held_size <= LEGACY_HOLD:
                return
            self._release()
        else:
            self.gz.write(data)

    def _release(self) -> None:
        held, self.held = self.held or [], None
        for data in held:
            if self.comparison.first_difference is not None:
                return
            self.gz.write(data)

    def abandon(self, offset: int) -> None:
        """The file has a second gzip member, starting at ``offset`` of the file: not this writer's output."""
        self.comparison.stop(offset)
        self.held = None

    def close(self) -> None:
        self._release()
        if self.comparison.first_difference is None:
            self.gz.close()


class RebuiltSink:
    """Receives the writer's output for the members read so far."""

    def __init__(self, comparison: Comparison) -> None:
        self.comparison = comparison

    def write(self, data: Any) -> int:
        self.comparison.feed(1, bytes(data))
        return len(data)

    def flush(self) -> None:
        pass
