"""Builders of hostile bundle files for the bad-input tests: crafted members, tar bombs made by streaming."""

from __future__ import annotations

import json
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_trt.audit.archive import tar_gz_bytes
from pytest_trt.audit.bundle import canonical_json
from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex
from pytest_trt.audit.sign import SIGNATURE
from tests.audit.conftest import read_members


def recrafted(bundle: Path, out: Path, edits: dict[str, Callable[[dict[str, Any]], Any]]) -> Path:
    """Edit JSON members of ``bundle`` and recompute the manifest: what anyone can do to an unsigned bundle.

    Each edit changes the parsed document in place; the signature is kept (it no longer matches).
    """
    members = read_members(bundle)
    for name, edit in edits.items():
        doc = json.loads(members[name])
        edit(doc)
        members[name] = canonical_json(doc)
    members[MANIFEST] = render_manifest(
        {n: sha256_hex(d) for n, d in members.items() if n not in (MANIFEST, SIGNATURE)})
    out.write_bytes(tar_gz_bytes(members))
    return out


def unsigned_copy(bundle: Path, out: Path) -> Path:
    members = read_members(bundle)
    members.pop(SIGNATURE, None)
    out.write_bytes(tar_gz_bytes(members))
    return out


def _gzip_member(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def tar_bomb(path: Path, *, member: str, declared: int, zeros_mib: int) -> Path:
    """A tar.gz whose ``member`` header declares ``declared`` bytes, followed by ``zeros_mib`` MiB of zeros.

    Built by streaming: one 16 MiB block of zeros is compressed once and its gzip member repeated (a gzip
    file may hold many members), so a 2 GiB payload is a file of about 2 MB, never 2 GiB on disk.
    """
    info = tarfile.TarInfo(member)
    info.size = declared
    header = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    block = _gzip_member(bytes(16 << 20))
    with open(path, "wb") as fh:
        fh.write(_gzip_member(header))
        for _ in range(zeros_mib // 16):
            fh.write(block)
    return path
