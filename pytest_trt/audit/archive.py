"""Deterministic tar.gz writing and safe in-memory tar reading.

A bundle's bytes must be a pure function of its members, so a reviewer can
rebuild it and compare hashes: members are sorted by name, every header field
that could carry the writer's machine or clock (mtime, uid/gid, user and group
names, mode) is fixed, and the gzip header has no timestamp and no file name.

Reading (:mod:`pytest_trt.audit.tarscan`) never extracts and checks every
header before any member data is decompressed.
"""

from __future__ import annotations

import gzip
import re
import struct
import tarfile
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from pytest_trt.audit.gathered import Deferred, Gathered
from pytest_trt.errors import UnsafeMember

#: mtime of every member: the epoch, so no writer's clock leaks into the bytes
FIXED_MTIME = 0
MEMBER_MODE = 0o644
#: level 1: serialized engines are mostly weights and kernels that compress poorly; level 6 made
#: the MobileNetV2 bundle 9 % smaller for twice the time, level 9 1 % smaller again for 4x
GZIP_LEVEL = 1
_MEMBER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def gzip_bytes(data: bytes) -> bytes:
    """gzip ``data`` deterministically (no mtime, no file name in the header), as :class:`gzip.GzipFile` writes it.

    zlib writes the gzip framing itself, in C calls that release the GIL for all of it (the bundle
    writer gzips the build log on another core): the same deflate stream (GzipFile's memory level and
    strategy) and header as ``GzipFile`` at :data:`GZIP_LEVEL` with mtime 0, except the OS byte, zlib's
    "Unix" (3) set to GzipFile's "unknown" (255).
    """
    gz = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
    out = gz.compress(data) + gz.flush()
    if out[:4] != b"\x1f\x8b\x08\x00" or out[4:8] != bytes(4):
        raise ValueError(f"zlib wrote an unexpected gzip header {out[:10].hex()}")  # never seen: zlib's fixed fields
    return out[:9] + b"\xff" + out[10:]


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = FIXED_MTIME
    info.mode = MEMBER_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


#: members whose data is stored in the gzip stream, not deflated: a serialized engine is weights and kernels that
#: gzip -1 shrank by ~10 % for ~0.6 s on a 14.5 MB MobileNetV2 engine, more than its build
STORED_MEMBERS = frozenset({"engine.plan"})
STORED_BLOCK = 0xFFFF  # the largest deflate stored block
#: BFINAL 0 and BTYPE 00 (stored), LEN, NLEN: the header of every full block but a member's last
_FULL_BLOCK_HEADER = b"\x00" + struct.pack("<HH", STORED_BLOCK, STORED_BLOCK ^ 0xFFFF)
#: gzip header of a stored member: no mtime, no name, XFL 0, OS 255 ("unknown"), as GzipFile writes them
STORED_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def stored_block_header(left: int) -> bytes:
    """The header :class:`SegmentedGzip` writes before the next block of a stored member with ``left`` bytes to
    go: a full block while more than one block's worth follows, else the final block with all of them."""
    if left > STORED_BLOCK:
        return _FULL_BLOCK_HEADER
    return bytes((1,)) + struct.pack("<HH", left, left ^ 0xFFFF)


class SegmentedGzip:
    """The bundle writer's gzip stream, shared by the writer and the verifier's rebuild.

    Deflated runs are gzip members at :data:`GZIP_LEVEL`; the data of a
    :data:`STORED_MEMBERS` member (and its tar padding) is its own gzip member of
    deflate *stored* blocks of 65,535 bytes, built here byte by byte, so the bytes
    depend only on the data, never on how it was fed.  Every gzip reader reads the
    concatenated members as one stream.
    """

    def __init__(self, fileobj: Any) -> None:
        self.fileobj = fileobj
        self._gz: gzip.GzipFile | None = None
        self._stored_left = 0
        self._buf = bytearray()
        self._crc: int | Callable[[], int] = 0
        self._crc_tail = bytearray()  # stored bytes after a CRC still being computed, folded in when it is known
        self._crc_whole = False  # the CRC (a function) covers the whole member: nothing to fold in
        self._size = 0
        self._open = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Deflated bytes (tar headers, small members, padding, the end of the archive)."""
        if self._gz is None:
            self._gz = gzip.GzipFile(filename="", mode="wb", fileobj=self.fileobj, compresslevel=GZIP_LEVEL, mtime=0)
        self._gz.write(data)

    def begin_stored(self, size: int, *, crc32: Callable[[], int] | None = None) -> None:
        """Start a stored gzip member of exactly ``size`` bytes (member data plus its tar padding); ``crc32``: a
        function that returns the CRC-32 of all of them, called when the trailer is written, for a caller that
        computes it anyway (the verifier's reader of the file's stored blocks): then none is computed here."""
        if self._gz is not None:
            self._gz.close()  # ends the deflated gzip member; the file object stays open
            self._gz = None
        self.fileobj.write(STORED_GZIP_HEADER)
        self._stored_left, self._buf, self._crc_tail, self._size = size, bytearray(), bytearray(), size
        self._crc, self._crc_whole = (0, False) if crc32 is None else (crc32, True)
        self._open = True
        if size == 0:
            self._finish_stored()

    def write_stored(self, data: bytes | bytearray | memoryview, *,
                     crc32: int | Callable[[], int] | None = None) -> None:
        """Stored bytes of the open stored member; ``crc32``: ``zlib.crc32(data)`` when the caller has it, or a
        function that returns it (called when the member's trailer is written, or, into a :class:`Gathered`,
        when the trailer is written to the file or hashed).

        A known ``crc32`` is accepted only for the member's first bytes (the running CRC is then 0):
        the bundle writer computes the engine's on another core while the archive is assembled and written.
        """
        if not data:
            return
        if not self._open:
            raise ValueError("stored bytes outside a stored member")
        view = memoryview(data).cast("B")
        if crc32 is not None:
            if self._stored_left != self._size or self._crc_whole:
                raise ValueError("a known CRC-32 is only accepted for a stored member's first bytes")
            self._crc = crc32
        elif self._crc_whole:
            pass  # begin_stored was given the CRC-32 of the whole member
        elif callable(self._crc):
            self._crc_tail += view
        else:
            self._crc = zlib.crc32(view, self._crc)
        self._stored_left -= len(view)
        if self._stored_left < 0:
            raise ValueError("more stored bytes than announced")
        # A block is written once more bytes are known to follow it, so the last one (final) holds the
        # member's last 1..65,535 bytes; full blocks go straight from ``data`` (a 14 MB engine is not copied).
        pos = 0
        if self._buf:
            pos = min(len(view), STORED_BLOCK - len(self._buf))
            self._buf += view[:pos]
            if len(self._buf) == STORED_BLOCK and (pos < len(view) or self._stored_left > 0):
                self._block(self._buf, final=False)
                self._buf = bytearray()
        write = self.fileobj.write
        while len(view) - pos > STORED_BLOCK or (len(view) - pos == STORED_BLOCK and self._stored_left > 0):
            write(_FULL_BLOCK_HEADER)  # the header of every full, non-final block: one constant
            write(view[pos : pos + STORED_BLOCK])
            pos += STORED_BLOCK
        self._buf += view[pos:]
        if self._stored_left == 0:
            self._finish_stored()

    def _block(self, data: bytes | bytearray | memoryview, *, final: bool) -> None:
        """A full block of 65,535 bytes, or the member's final one (the headers the verifier expects)."""
        self.fileobj.write(stored_block_header(len(data)) if final else _FULL_BLOCK_HEADER)
        self.fileobj.write(data)

    def _finish_stored(self) -> None:
        self._block(bytes(self._buf), final=True)
        self._buf = bytearray()
        self._open = False
        crc, tail, size = self._crc, bytes(self._crc_tail), self._size & 0xFFFFFFFF
        if not callable(crc):
            self.fileobj.write(struct.pack("<II", crc & 0xFFFFFFFF, size))
            return

        def trailer() -> bytes:
            return struct.pack("<II", zlib.crc32(tail, crc()) & 0xFFFFFFFF, size)

        write_deferred = getattr(self.fileobj, "write_deferred", None)
        if write_deferred is not None:
            write_deferred(Deferred(8, trailer))
        else:
            self.fileobj.write(trailer())

    def close(self) -> None:
        if self._gz is not None:
            self._gz.close()
            self._gz = None

    def __enter__(self) -> SegmentedGzip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_tar_gz(members: Mapping[str, bytes | memoryview], fileobj: Any, *,
                 crc32: Mapping[str, int | Callable[[], int]] | None = None) -> None:
    """Write ``members`` (flat names) as a deterministic tar.gz into ``fileobj``.

    USTAR headers (no PAX records, whose fields could carry atime/ctime or locale-dependent
    values; our flat names fit its 100-byte limit), members sorted by name, the end-of-archive
    blocks and padding to a 10 KiB record, exactly as :mod:`tarfile` writes them; the gzip
    stream as :class:`SegmentedGzip` frames it.  ``crc32``: ``zlib.crc32`` of stored members'
    data, or functions that return it, already computed or being computed elsewhere (the bytes are
    the same whether it is given or not).
    """
    for name in members:
        check_member_name(name)
    known = crc32 or {}
    offset = 0
    with SegmentedGzip(fileobj) as gz:
        for name in sorted(members):
            data = members[name]
            pad = bytes(-len(data) % tarfile.BLOCKSIZE)
            gz.write(member_header(name, len(data)))
            if name in STORED_MEMBERS:
                gz.begin_stored(len(data) + len(pad))
                gz.write_stored(data, crc32=known.get(name))
                gz.write_stored(pad)
            else:
                gz.write(bytes(data) + pad)
            offset += tarfile.BLOCKSIZE + len(data) + len(pad)
        offset += 2 * tarfile.BLOCKSIZE
        gz.write(bytes(2 * tarfile.BLOCKSIZE + (-offset % tarfile.RECORDSIZE)))


def tar_gz_bytes(members: Mapping[str, bytes]) -> bytes:
    out = Gathered()
    write_tar_gz(members, out)
    return out.getvalue()


def check_member_name(name: str) -> None:
    """Raise :class:`UnsafeMember` unless ``name`` is a flat, harmless file name."""
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise UnsafeMember(name, "absolute path")
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        raise UnsafeMember(name, "parent-directory reference '..'")
    if len(parts) > 1:
        raise UnsafeMember(name, "nested path (bundle members are flat)")
    if not _MEMBER_NAME.match(name):
        raise UnsafeMember(name, "name with characters outside [A-Za-z0-9._-]")


def member_header(name: str, size: int) -> bytes:
    """The 512-byte USTAR header :func:`write_tar_gz` writes for a member (the verifier rebuilds it)."""
    return _tarinfo(name, size).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
