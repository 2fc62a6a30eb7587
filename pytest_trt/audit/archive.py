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
import io
import re
import tarfile
from collections.abc import Mapping

#: mtime of every member: the epoch, so no writer's clock leaks into the bytes
FIXED_MTIME = 0
MEMBER_MODE = 0o644
#: level 1: serialized engines are mostly weights and kernels that compress poorly; level 6 made
#: the MobileNetV2 bundle 9 % smaller for twice the time, level 9 1 % smaller again for 4x
GZIP_LEVEL = 1
_MEMBER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class UnsafeMember(ValueError):
    """A tar member that is not a flat regular file; ``member`` names it."""

    def __init__(self, member: str, why: str) -> None:
        super().__init__(f"{member!r}: {why}")
        self.member = member
        self.why = why


def gzip_bytes(data: bytes) -> bytes:
    """gzip ``data`` deterministically (no mtime, no file name in the header)."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=GZIP_LEVEL, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def _tarinfo(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = FIXED_MTIME
    info.mode = MEMBER_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info


def write_tar_gz(members: Mapping[str, bytes], fileobj: io.BufferedIOBase | io.BytesIO) -> None:
    """Write ``members`` (flat names) as a deterministic tar.gz into ``fileobj``."""
    for name in members:
        check_member_name(name)
    tar_buf = io.BytesIO()
    # USTAR: no PAX headers, whose records could carry atime/ctime or
    # locale-dependent fields; our flat names fit its 100-byte limit.
    with tarfile.open(fileobj=tar_buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(members):
            data = members[name]
            tar.addfile(_tarinfo(name, len(data)), io.BytesIO(data))
    # one write: gzip's per-call overhead dominated when tarfile fed it 16 KiB blocks
    with gzip.GzipFile(filename="", mode="wb", fileobj=fileobj, compresslevel=GZIP_LEVEL, mtime=0) as gz:
        gz.write(tar_buf.getbuffer())


def tar_gz_bytes(members: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    write_tar_gz(members, buf)
    return buf.getvalue()


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
