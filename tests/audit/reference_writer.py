"""The bundle archive format written out independently of ``pytest_trt.audit.archive``, for byte comparisons.

Built from the format's definition (RFC 1951 stored blocks, RFC 1952 members, USTAR through
:mod:`tarfile`), not from the writer's code: the whole tar is made by :mod:`tarfile`, the bytes
before and after the engine's data are each one gzip -1 member (mtime 0, no name), and the
engine's data with its tar padding is one gzip member of 65,535-byte stored blocks.
"""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import zlib

STORED = "engine.plan"


def ustar(members: dict[str, bytes]) -> tuple[bytes, tuple[int, int] | None]:
    """The tar of ``members`` as tarfile writes it, and the (start, end) of the engine's padded data."""
    buf = io.BytesIO()
    span = None
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
                len(members[name]), 0, 0o644, 0, 0, "", "")
            start = buf.tell() + tarfile.BLOCKSIZE
            tf.addfile(info, io.BytesIO(members[name]))
            if name == STORED:
                span = (start, buf.tell())
    return buf.getvalue(), span


def _deflated(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=1, mtime=0) as gz:
        gz.write(data)
    return out.getvalue()


def _stored(data: bytes) -> bytes:
    out = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")  # no flags, mtime 0, XFL 0, OS unknown
    blocks = [data[i:i + 0xFFFF] for i in range(0, len(data), 0xFFFF)] or [b""]
    for i, block in enumerate(blocks):
        out += bytes([1 if i == len(blocks) - 1 else 0]) + struct.pack("<HH", len(block), len(block) ^ 0xFFFF)
        out += block
    out += struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
    return bytes(out)


def reference_tar_gz(members: dict[str, bytes]) -> bytes:
    """What the bundle writer must write for ``members`` (the format with the stored engine member)."""
    tar, span = ustar(members)
    if span is None:
        return _deflated(tar)
    start, end = span
    return _deflated(tar[:start]) + _stored(tar[start:end]) + _deflated(tar[end:])
