"""Bounded, single-pass reading of a bundle's tar.gz, with a byte-for-byte canonical check.

A bundle comes from anyone, so reading it must cost no more memory than the
caller allows, whatever the file claims:

* every 512-byte tar header is parsed here (not by :mod:`tarfile`, which reads
  PAX and GNU long-name records into memory whole) and checked before any of
  its data is decompressed: checksum, type (only regular files), flat name,
  no duplicates, and the declared size against the caller's cap for that name;
* member data is streamed in chunks; only members the caller keeps are held in
  memory, and never more than their cap;
* zero padding after the last member is bounded.

The same pass rebuilds the archive the deterministic writer
(:func:`pytest_trt.audit.archive.write_tar_gz`) would produce from these
members, compresses it and hashes it, and hashes the file's own bytes.  Equal
digests mean the file is exactly the writer's output for its members, so a
change anywhere (gzip header, deflate bits that decompress to the same data,
tar header fields nobody reads) is detected.
"""

from __future__ import annotations

import _thread
import gzip
import hashlib
import os
import tarfile
import threading
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import Any, BinaryIO

from pytest_trt.audit.archive import (
    GZIP_LEVEL,
    STORED_MEMBERS,
    SegmentedGzip,
    check_member_name,
    member_header,
)
from pytest_trt.errors import ArchiveError, UnsafeMember

BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
#: zero bytes allowed after the end-of-archive blocks (the writer pads to one 10 KiB record)
MAX_TRAILING_ZEROS = RECORD
#: once the file differs from the writer's output it will be refused; read on only this much further
#: (for a precise message about a member), so a bomb costs bounded time too
MAX_READ_AFTER_DIFFERENCE = 64 << 20
#: bytes of the raw file read at a time
READ_BLOCK = 1 << 20
#: tar bytes held for the earlier writer's rebuild before it is compressed (see :class:`_LegacyRebuild`)
LEGACY_HOLD = 4 << 20
#: files at least this large are hashed on a thread while they are inflated and compared
HASH_THREAD_BYTES = 4 << 20

_TYPES = {
    b"1": "hard link", b"2": "link", b"3": "device file", b"4": "device file", b"5": "directory",
    b"6": "FIFO", b"7": "contiguous file", b"x": "PAX extended header", b"g": "PAX global header",
    b"L": "GNU long name record", b"K": "GNU long link record", b"S": "GNU sparse file",
}


@dataclass(frozen=True)
class Scan:
    """What one pass over an archive found."""

    members: dict[str, bytes]  # the kept members' bytes
    sha256: dict[str, str]  # every member's sha256
    sizes: dict[str, int]
    order: tuple[str, ...]  # members in archive order
    file_sha256: str  # of the file's bytes
    first_difference: int | None  # offset of the first byte differing from the writer's output; None: identical

    @property
    def canonical(self) -> bool:
        return self.first_difference is None


class _Comparison:
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


class _RawReader:
    """The raw file in 1 MiB blocks: every block is hashed (on another thread: hashlib releases the GIL) and
    compared with the writer's output; the file is read exactly once, in order."""

    def __init__(self, fh: BinaryIO, comparison: _Comparison, legacy: _Comparison) -> None:
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


class _Inflater:
    """The tar stream inside the raw file's gzip members (one or more), inflated on demand.

    Each gzip member is checked by zlib (wbits 31: header, deflate data, CRC-32 and length); a file that ends
    before a member's trailer is truncated.  ``on_next_member(offset)`` is called when a member is followed by
    another, which starts at ``offset`` of the file.
    """

    def __init__(self, raw: _RawReader, on_next_member: Callable[[int], None]) -> None:
        self.raw = raw
        self.on_next_member = on_next_member
        self.inflate = zlib.decompressobj(31)
        self.pending = b""  # compressed bytes read and not yet given to zlib
        self.members = 1

    def read_some(self, n: int) -> bytes:
        """1 to ``n`` bytes (as zlib gives them, without joining), or none at the end of the last gzip member."""
        while True:
            if self.inflate.eof:
                rest = self.inflate.unused_data or self.raw.read()
                if not rest:
                    return b""
                self.members += 1
                self.on_next_member(self.raw.size - len(rest))
                self.inflate, self.pending = zlib.decompressobj(31), rest
            if not self.pending:
                self.pending = self.raw.read()
                if not self.pending:
                    raise ArchiveError("the file ends inside a gzip member (truncated file)")
            out = self.inflate.decompress(self.pending, n)
            self.pending = self.inflate.unconsumed_tail
            if out:
                return out

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes: fewer only at the end of the last gzip member."""
        out = self.read_some(n)
        if len(out) == n or not out:
            return out
        parts = [out]
        want = n - len(out)
        while want and (more := self.read_some(want)):
            parts.append(more)
            want -= len(more)
        return b"".join(parts)


class _LegacyRebuild:
    """The earlier bundle writer (the whole tar in one gzip -1 member), so bundles it wrote still verify.

    That writer wrote one gzip member, so the file can be its output only while its first gzip member goes on.
    The tar bytes are held (up to :data:`LEGACY_HOLD` of them) rather than compressed at once: a current
    bundle's first member ends after its small members, the rebuild is abandoned then, and it cost nothing.
    Past the hold, or at the end of a one-member file, the held bytes are compressed and compared; from then on
    it stops compressing as soon as the file differs from it.
    """

    def __init__(self, comparison: _Comparison) -> None:
        self.comparison = comparison
        self.held: list[bytes] | None = []
        self.held_size = 0
        self.gz = gzip.GzipFile(filename="", mode="wb", fileobj=_RebuiltSink(comparison), compresslevel=GZIP_LEVEL,
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


class _RebuiltSink:
    """Receives the writer's output for the members read so far."""

    def __init__(self, comparison: _Comparison) -> None:
        self.comparison = comparison

    def write(self, data: Any) -> int:
        self.comparison.feed(1, bytes(data))
        return len(data)

    def flush(self) -> None:
        pass


def _octal(field: bytes, what: str) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256: only for values our writer never produces
        raise ArchiveError(f"tar header {what} uses base-256 encoding (bundles use octal)")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    try:
        return int(text.decode("ascii"), 8)
    except ValueError:
        raise ArchiveError(f"tar header {what} field {field!r} is not octal") from None


def _name(header: bytes) -> str:
    name = header[0:100].split(b"\0", 1)[0]
    prefix = header[345:500].split(b"\0", 1)[0] if header[257:262] == b"ustar" else b""
    full = prefix + b"/" + name if prefix else name
    return full.decode("utf-8", "surrogateescape")


def _check_header(header: bytes) -> tuple[str, int]:
    stored = _octal(header[148:156], "checksum")
    actual = sum(header[:148]) + 8 * 32 + sum(header[156:])
    if stored != actual:
        raise ArchiveError(f"tar header checksum {stored} does not match its bytes ({actual})")
    name = _name(header)
    kind = header[156:157]
    if kind not in (b"0", b"\0"):
        why = _TYPES.get(kind, f"unsupported member type {kind!r}")
        if kind in (b"1", b"2"):
            link = header[157:257].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            why = f"link to {link!r}"
        raise UnsafeMember(name.rstrip("/") or "<unnamed>", why)
    check_member_name(name)
    return name, _octal(header[124:136], "size")


def _read_exact(gz: Any, n: int) -> bytes:
    data: bytes = gz.read(n)
    if len(data) != n:
        raise ArchiveError("archive ends in the middle of a member (truncated file)")
    return data


def _checked_size(header: bytes, seen: Mapping[str, int], max_size: Callable[[str], int]) -> tuple[str, int]:
    """The member name and size of ``header``, refused before any of its data is decompressed."""
    name, size = _check_header(header)
    if name in seen:
        raise UnsafeMember(name, "duplicate member")
    cap = max_size(name)
    if cap < 0:
        raise UnsafeMember(name, "unknown member name for this bundle schema")
    if size > cap:
        raise ArchiveError(
            f"member {name} declares {size:,} bytes, more than the {cap:,} accepted for it (sized from what "
            "pytest-trt writes, with margin: a decompression bomb or a damaged header); nothing was decompressed"
        )
    return name, size


def _check_trailer(gz: Any) -> None:
    """After the end-of-archive marker: zeros only, and not too many of them."""
    trailing = gz.read(MAX_TRAILING_ZEROS + 1)
    if trailing.strip(b"\0"):
        raise UnsafeMember("<end of archive>", "non-zero data after the last member")
    if len(trailing) > MAX_TRAILING_ZEROS:
        raise ArchiveError(
            f"more than {MAX_TRAILING_ZEROS:,} bytes of padding after the last member "
            "(a decompression bomb or a damaged file)"
        )


@dataclass
class _Reading:
    """What one pass over an archive collects, and the two rebuilds it feeds as it reads."""

    rebuilt: Any
    legacy: _LegacyRebuild
    comparisons: tuple[_Comparison, _Comparison]
    chunk: int
    members: dict[str, bytes] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    offset: int = 0

    def both(self, data: bytes) -> None:
        self.rebuilt.write(data)
        self.legacy.write(data)

    def member(self, gz: Any, name: str, size: int, keep: bool) -> None:
        """Read one member's data and padding, hashing it and feeding both rebuilds."""
        self.both(member_header(name, size))
        stored = name in STORED_MEMBERS
        pad = -size % BLOCK
        if stored:
            self.rebuilt.begin_stored(size + pad)
        put = self.rebuilt.write_stored if stored else self.rebuilt.write
        h, kept, left = hashlib.sha256(), [], size
        while left:
            _check_progress(self.comparisons[0], self.offset + size - left, self.comparisons[1])
            block = gz.read_some(min(self.chunk, left))
            if not block:
                raise ArchiveError("archive ends in the middle of a member (truncated file)")
            left -= len(block)
            h.update(block)
            put(block)
            self.legacy.write(block)
            if keep:
                kept.append(block)
        if pad and _read_exact(gz, pad) != bytes(pad):
            raise ArchiveError(f"member {name}: non-zero padding after its data")
        put(bytes(pad))
        self.legacy.write(bytes(pad))
        self.offset += BLOCK + size + pad
        if keep:
            self.members[name] = b"".join(kept)
        self.hashes[name], self.sizes[name] = h.hexdigest(), size
        self.order.append(name)


def scan(
    path: Path,
    *,
    max_size: Callable[[str], int],
    keep: Callable[[str], bool],
    chunk: int = 1 << 20,
) -> Scan:
    """Read ``path`` once; raise :class:`UnsafeMember` or :class:`ArchiveError` on anything unsafe or broken.

    ``max_size(name)`` is the largest size accepted for a member (checked from
    its header, before its data is decompressed); a name the caller does not
    know should get a size of -1, which refuses it as unknown.  ``keep(name)``
    says whether the member's bytes are returned (others are only hashed).
    ``OSError`` from opening the file is left to the caller.
    """
    comparison = _Comparison()
    legacy_comparison = _Comparison()
    sink = _RebuiltSink(comparison)
    legacy = _LegacyRebuild(legacy_comparison)
    with open(path, "rb") as raw_fh:
        if not raw_fh.read(1):
            raise ArchiveError("is empty (0 bytes), not a bundle")
        raw_fh.seek(0)
        raw = _RawReader(raw_fh, comparison, legacy_comparison)
        try:
            gz = _Inflater(raw, legacy.abandon)
            writer: Any = sink  # duck-typed file object
            with SegmentedGzip(writer) as rebuilt:
                reading = _Reading(rebuilt, legacy, (comparison, legacy_comparison), chunk)
                while True:
                    header = gz.read(BLOCK)
                    if len(header) < BLOCK:
                        raise ArchiveError("archive ends without the end-of-archive marker (truncated file)")
                    if header == bytes(BLOCK):
                        break
                    name, size = _checked_size(header, reading.sizes, max_size)
                    reading.member(gz, name, size, keep(name))
                _check_trailer(gz)
                end = reading.offset + 2 * BLOCK
                reading.both(bytes(2 * BLOCK) + bytes(-end % RECORD))
            legacy.close()
            raw.drain()
        except zlib.error as exc:
            raise ArchiveError(f"not a readable tar.gz archive ({exc})") from None
        finally:
            raw.close()
    comparison.finish()
    legacy_comparison.finish()
    # a bundle of the earlier writer (one gzip -1 member) is canonical if that writer's rebuild matches it
    difference = None if legacy_comparison.first_difference is None else comparison.first_difference
    return Scan(reading.members, reading.hashes, reading.sizes, tuple(reading.order), raw.hexdigest(),
                difference)


def _check_progress(comparison: _Comparison, offset: int, legacy: _Comparison | None = None) -> None:
    """Stop reading a file already known to differ from the writer's output, once far past the difference."""
    if comparison.first_difference is None or (legacy is not None and legacy.first_difference is None):
        return
    if comparison.noticed_at is None:
        comparison.noticed_at = offset
    if offset - comparison.noticed_at > MAX_READ_AFTER_DIFFERENCE:
        raise ArchiveError(
            f"the file differs from the writer's archive of its members from byte {comparison.first_difference:,} "
            f"and still goes on {MAX_READ_AFTER_DIFFERENCE >> 20} MiB later (a decompression bomb or a damaged "
            "file); reading stopped"
        )
