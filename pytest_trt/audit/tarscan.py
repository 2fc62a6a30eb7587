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

import hashlib
import tarfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_trt.audit.archive import (
    STORED_MEMBERS,
    SegmentedGzip,
    check_member_name,
    member_header,
)
from pytest_trt.audit.tarstream import Comparison, Inflater, LegacyRebuild, RawReader, RebuiltSink
from pytest_trt.errors import ArchiveError, UnsafeMember

BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
#: zero bytes allowed after the end-of-archive blocks (the writer pads to one 10 KiB record)
MAX_TRAILING_ZEROS = RECORD
#: once the file differs from the writer's output it will be refused; read on only this much further
#: (for a precise message about a member), so a bomb costs bounded time too
MAX_READ_AFTER_DIFFERENCE = 64 << 20

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
    legacy: LegacyRebuild
    comparisons: tuple[Comparison, Comparison]
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
        if stored:  # read from the file's stored blocks when framed as the writer frames them; their CRC is reused
            gz.expect_stored(size + pad)
            self.rebuilt.begin_stored(size + pad, crc32=gz.stored_crc)
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
    comparison = Comparison()
    legacy_comparison = Comparison()
    sink = RebuiltSink(comparison)
    legacy = LegacyRebuild(legacy_comparison)
    with open(path, "rb") as raw_fh:
        if not raw_fh.read(1):
            raise ArchiveError("is empty (0 bytes), not a bundle")
        raw_fh.seek(0)
        raw = RawReader(raw_fh, comparison, legacy_comparison)
        try:
            gz = Inflater(raw, legacy.abandon)
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


def _check_progress(comparison: Comparison, offset: int, legacy: Comparison | None = None) -> None:
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
