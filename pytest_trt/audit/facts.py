"""A bundle's verified facts, read without verifying it again while the file is the one that was verified.

A bundle verified before is known by its file identity (size, mtime_ns, ctime_ns, inode: ctime and inode
cannot be set back, so an edit in place shows) and by the digest of its manifest and signature
(:func:`~pytest_trt.audit.sidecar.members_digest`), as recorded by the bundle's sidecar or by a catalog row.
For such a file :func:`read_members` reads the small members only (the engine's stored gzip member is
skipped by seeking over its blocks), checks each against the manifest's sha256, and parses their JSON: no
canonical-bytes check and no schema walk.  Anything else (no record, a changed file, a digest or hash that
differs, a member that cannot be read) is verified completely with
:func:`~pytest_trt.audit.verify.verify_bundle`, once per file.

This is a cache of a verification, not a security boundary: ``pytest-trt bundle verify`` checks the bytes.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pytest_trt.audit import bundle as b
from pytest_trt.audit.archive import STORED_BLOCK, STORED_GZIP_HEADER, stored_block_header
from pytest_trt.audit.manifest import MANIFEST, parse_manifest
from pytest_trt.audit.sign import SIGNATURE
from pytest_trt.audit.verify import MEMBER_LIMITS, VerifiedBundle, verify_bundle
from pytest_trt.common.filehash import stat_identity as identity
from pytest_trt.errors import ArchiveError, BundleIntegrityError

_BLOCK = 512
_CHUNK = 1 << 16
_JSON_MEMBERS = (b.BUILD, b.CONFIG, b.ENVIRONMENT, b.CALIBRATION, b.GOLDEN)

#: size, mtime_ns, ctime_ns, inode
Identity = tuple[int, int, int, int]


@dataclass(frozen=True)
class Verified:
    """What a verification of a bundle file recorded: the file's sha256, its identity, its members digest."""

    sha256: str
    identity: Identity
    members_sha256: str


class _Inflater:
    """The tar stream of a bundle, inflated across its gzip members on demand."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.d = zlib.decompressobj(31)
        self.raw = b""
        self.buf = bytearray()

    def _feed(self) -> bool:
        """Inflate some more; False at the end of the file on a gzip member boundary."""
        if self.d.eof:
            self.raw = self.d.unused_data + self.raw
            if not self.raw:
                self.raw = self.fh.read(_CHUNK)
                if not self.raw:
                    return False
            self.d = zlib.decompressobj(31)
        if not self.raw:
            self.raw = self.fh.read(_CHUNK)
            if not self.raw:
                raise ArchiveError("archive ends in the middle of a gzip member (truncated file)")
        out = self.d.decompress(self.raw, 1 << 20)
        self.raw = self.d.unconsumed_tail
        self.buf += out
        return True

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._feed():
                raise ArchiveError("archive ends in the middle of a member (truncated file)")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def skip(self, n: int) -> None:
        """Pass over ``n`` bytes of tar data: seek over a stored gzip member that holds exactly them, else inflate."""
        if not self.buf and self._at_member_end():
            start = self.fh.tell() - len(self.d.unused_data)
            if self._seek_stored(start, n):
                self.d, self.raw = zlib.decompressobj(31), b""
                return
            self.fh.seek(start)
            self.d, self.raw = zlib.decompressobj(31), b""
        while n:
            part = min(n, 1 << 20)
            self.take(part)
            n -= part

    def _at_member_end(self) -> bool:
        """Read the current gzip member to its end if it holds no more tar data; False when it does (or ends early)."""
        while not self.d.eof:
            if not self.raw:
                self.raw = self.fh.read(_CHUNK)
                if not self.raw:
                    return False
            self.buf += self.d.decompress(self.raw, 1 << 20)
            self.raw = self.d.unconsumed_tail
            if self.buf:
                return False
        return not self.raw

    def _seek_stored(self, start: int, n: int) -> bool:
        """Seek over a gzip member of deflate stored blocks of 65,535 bytes holding ``n`` bytes (the writer's
        layout, :class:`~pytest_trt.audit.archive.SegmentedGzip`): its first and last block headers and its
        length trailer are checked, the blocks between are not read."""
        fh = self.fh
        fh.seek(start)
        head = fh.read(15)  # gzip header, first block header
        blocks = max(1, -(-n // STORED_BLOCK))
        last = n - STORED_BLOCK * (blocks - 1)
        if len(head) != 15 or head[:4] != STORED_GZIP_HEADER[:4] or head[10:] != stored_block_header(n):
            return False
        if blocks > 1:
            fh.seek(start + 10 + (5 + STORED_BLOCK) * (blocks - 1))
            if fh.read(5) != stored_block_header(last):
                return False
        fh.seek(last, os.SEEK_CUR)
        trailer = fh.read(8)
        return len(trailer) == 8 and struct.unpack("<I", trailer[4:])[0] == n & 0xFFFFFFFF


def read_members(path: Path) -> tuple[dict[str, bytes], dict[str, str]]:
    """Every member but the engine, and the manifest's sha256 of each member (the engine's included).

    Each member read is hashed and must equal the manifest; raises ``ValueError`` (or ``OSError``) when the
    archive cannot be read this way or a member differs.
    """
    import hashlib

    from pytest_trt.audit.tarscan import _check_header

    members: dict[str, bytes] = {}
    hashes: dict[str, str] = {}
    with open(path, "rb") as fh:
        stream = _Inflater(fh)
        while True:
            header = stream.take(_BLOCK)
            if header == bytes(_BLOCK):
                break
            name, size = _check_header(header)
            if name in members or size > MEMBER_LIMITS.get(name, -1):
                raise ValueError(f"{name}: a member this reader does not take ({size} bytes)")
            padding = -size % _BLOCK
            if name == b.ENGINE:
                stream.skip(size + padding)
                continue
            data = stream.take(size)
            stream.take(padding)
            members[name] = data
            hashes[name] = hashlib.sha256(data).hexdigest()
    listed = parse_manifest(members[MANIFEST]) if MANIFEST in members else None
    if listed is None:
        raise ValueError("no MANIFEST.sha256")
    for name in set(hashes) - {MANIFEST, SIGNATURE}:
        if listed.get(name) != hashes[name]:
            raise ValueError(f"{name}: sha256 differs from the manifest")
    if set(listed) - set(hashes) - {b.ENGINE}:
        raise ValueError("a member the manifest lists is missing")
    return members, {**listed, **hashes}


def facts_bundle(path: Path, members: dict[str, bytes], hashes: dict[str, str], sha256: str) -> VerifiedBundle:
    """The :class:`VerifiedBundle` of members read by :func:`read_members` (no signature checked now)."""
    docs = {name: json.loads(members[name]) for name in _JSON_MEMBERS if name in members}
    return VerifiedBundle(path=path, sha256=sha256, members=members, member_sha256=hashes, engine_size=None,
                          signer=None, signed=SIGNATURE in members, docs=docs)


class FactsReader:
    """Bundles for a review: verified facts where the file is unchanged since verified, else a full verify.

    ``lookup(path)`` gives a catalog's record of the file (or None); ``reverify`` verifies every file.  Each file
    (by path and identity) is read once, however often it is asked for.  Nothing is written: the facts are the
    recorder's sidecars and the catalog's rows.
    """

    def __init__(self, *, lookup: Callable[[Path], Verified | None] | None = None, reverify: bool = False) -> None:
        self.lookup = lookup
        self.reverify = reverify
        self.from_facts = 0
        self.verified = 0
        self._memo: dict[tuple[str, Identity], VerifiedBundle] = {}
        self._failed: dict[tuple[str, Identity], BundleIntegrityError] = {}

    def read(self, path: Path) -> VerifiedBundle:
        """The bundle's facts; raises as :func:`verify_bundle` does for a file that is not usable."""
        path = Path(path)
        before = os.stat(path)
        key = (os.path.abspath(path), identity(before))
        if key in self._memo:
            return self._memo[key]
        if key in self._failed:
            raise self._failed[key]
        vb = None if self.reverify else self._known(path, before)
        if vb is None:
            self.verified += 1
            try:
                vb = verify_bundle(path)
            except BundleIntegrityError as exc:
                self._failed[key] = exc
                raise
        else:
            self.from_facts += 1
        self._memo[key] = vb
        return vb

    def _known(self, path: Path, before: os.stat_result) -> VerifiedBundle | None:
        from pytest_trt.audit.sidecar import members_digest, read_state

        state = read_state(path)
        known = Verified(state.sha256, identity(before), state.members_sha256) if state is not None else None
        if known is None and self.lookup is not None:
            known = self.lookup(path)
        if known is None or known.identity != identity(before):
            return None
        try:
            members, hashes = read_members(path)
            if members_digest(members[MANIFEST], members.get(SIGNATURE)) != known.members_sha256:
                return None
            if identity(os.stat(path)) != identity(before):  # changed while it was read
                return None
            return facts_bundle(path, members, hashes, known.sha256)
        except (OSError, ValueError, ArchiveError, KeyError):
            return None
