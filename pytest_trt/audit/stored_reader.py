"""A bundle's stored gzip member (the engine's data), read from the file's bytes without inflating them: one
pass over a bundle (:mod:`pytest_trt.audit.tarstream`) reads the engine's stored blocks through it."""

from __future__ import annotations

import struct
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

from pytest_trt.audit.archive import STORED_BLOCK, stored_block_header
from pytest_trt.errors import ArchiveError

#: the data a deflate block may refer back to (RFC 1951)
WINDOW = 1 << 15


class StoredReader:
    """A gzip member of deflate stored blocks, its data taken from the raw file's bytes without inflating them.

    Every block header must be the one :class:`~pytest_trt.audit.archive.SegmentedGzip` writes for the ``size``
    bytes announced; the CRC-32 of the data is computed here once (the rebuild takes it) and checked with the
    length against the member's trailer, as zlib checks them.  Where a block header differs (a member the writer
    did not frame: the file will be refused as not canonical), the rest of the member is inflated by zlib from
    there, the last 32 KiB of data given as its window, so its members are still read and hashed.
    """

    def __init__(self, read: Callable[[], bytes], size: int, pending: memoryview) -> None:
        self.read = read  # the next raw block of the file; empty at its end
        self.left = size  # announced bytes whose blocks are still to come
        self.pending: bytes | memoryview = pending
        self.block_left = 0  # data bytes left in the current block
        self.final = False  # the current block is the member's last
        self.crc = 0
        self.total = 0
        self.history: deque[bytes | memoryview] = deque()  # the last data returned, a window for zlib
        self.held = 0  # bytes in history
        self.inflate: Any = None  # raw deflate, once a block header differs from the writer's
        self.leftover: bytes | memoryview = b""  # raw bytes after the member's trailer

    def read_some(self, n: int) -> bytes | memoryview:
        """1 to ``n`` bytes of data, or none once the member's trailer was read and checked."""
        out = self._inflated(n) if self.inflate is not None else self._stored(n)
        if not out:
            self._check_trailer()
            return b""
        self.crc = zlib.crc32(out, self.crc)
        self.total += len(out)
        if self.inflate is None:
            self._remember(out)
        return out

    def _stored(self, n: int) -> bytes | memoryview:
        while not self.block_left:
            if self.final:
                return b""
            header, expected = self._take(5), stored_block_header(self.left)
            if header != expected:
                self._fall_back(header)
                return self._inflated(n)
            self.block_left, self.final = min(self.left, STORED_BLOCK), expected[0] == 1
        if not self.pending:
            self.pending = self._raw_read()
        k = min(n, self.block_left, len(self.pending))
        out, self.pending = self.pending[:k], self.pending[k:]
        self.block_left -= k
        self.left -= k
        return out

    def _fall_back(self, header: bytes) -> None:
        window = b"".join(self.history)[-WINDOW:]
        self.inflate = zlib.decompressobj(-zlib.MAX_WBITS, zdict=window) if window else zlib.decompressobj(
            -zlib.MAX_WBITS)
        self.pending = header + bytes(self.pending)
        self.history.clear()

    def _inflated(self, n: int) -> bytes:
        while not self.inflate.eof:
            if not self.pending:
                self.pending = self._raw_read()
            out: bytes = self.inflate.decompress(self.pending, n)
            self.pending = self.inflate.unused_data if self.inflate.eof else self.inflate.unconsumed_tail
            if out:
                return out
        return b""

    def _remember(self, out: bytes | memoryview) -> None:
        self.history.append(out)
        self.held += len(out)
        while self.held - len(self.history[0]) >= WINDOW:
            self.held -= len(self.history.popleft())

    def _check_trailer(self) -> None:
        trailer = self._take(8)
        crc, size = struct.unpack("<II", trailer)
        if crc != self.crc & 0xFFFFFFFF:
            raise ArchiveError("not a readable tar.gz archive (a stored gzip member's CRC-32 does not match its "
                               "data: incorrect data check)")
        if size != self.total & 0xFFFFFFFF:
            raise ArchiveError("not a readable tar.gz archive (a stored gzip member's length does not match its "
                               "data: incorrect length check)")
        self.leftover, self.pending = self.pending, b""

    def _take(self, k: int) -> bytes:
        """The next ``k`` raw bytes, across raw blocks (big blocks are not copied)."""
        got = bytes(self.pending[:k])
        self.pending = self.pending[k:]
        while len(got) < k:
            more = self._raw_read()
            need = k - len(got)
            got += bytes(more[:need])
            self.pending = more[need:]
        return got

    def _raw_read(self) -> memoryview:
        data = self.read()
        if not data:
            raise ArchiveError("the file ends inside a gzip member (truncated file)")
        return memoryview(data)
