"""The engine is stored, not deflated, in the bundle; bundles of the earlier writer still verify."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit.bundle import write_bundle
from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.conftest import read_members


def _gzip_members(raw: bytes) -> list[int]:
    """Offsets of each gzip member of ``raw`` (an independent walk with zlib)."""
    starts, pos = [], 0
    while pos < len(raw):
        starts.append(pos)
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(raw[pos:])
        assert d.eof
        pos = len(raw) - len(d.unused_data)
    return starts


def _legacy_writer(members: dict[str, bytes]) -> bytes:
    """The writer of commit 8dc4855, written out: the whole USTAR tar in one gzip -1 member, mtime 0."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = (
                len(members[name]), 0, 0o644, 0, 0, "", "")
            tf.addfile(info, io.BytesIO(members[name]))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=1, mtime=0) as gz:
        gz.write(tar.getvalue())
    return out.getvalue()


def test_engine_bytes_are_stored_verbatim_and_verify(tmp_path: Path, mnv2: Any, record_of: Any,
                                                     environment: dict[str, Any]) -> None:
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment)
    raw = info.path.read_bytes()
    assert len(_gzip_members(raw)) == 3  # deflated headers and small members | stored engine | the rest
    engine = mnv2.engine
    assert engine[:65535] in raw and engine[-1000:] in raw  # stored blocks: the bytes appear as they are
    assert verify_bundle(info.path).engine_sha256 == mnv2.engine_sha256
    assert gzip.decompress(raw) == gzip.decompress(_legacy_writer(read_members(info.path)))  # same tar inside


def test_a_bundle_of_the_earlier_writer_verifies_and_its_tampering_is_found(tmp_path: Path, mnv2: Any,
                                                                           record_of: Any,
                                                                           environment: dict[str, Any]) -> None:
    current = write_bundle(mnv2, tmp_path / "now", record=record_of(mnv2), environment=environment)
    members = read_members(current.path)
    legacy = tmp_path / current.path.name
    legacy.write_bytes(_legacy_writer(members))
    assert len(_gzip_members(legacy.read_bytes())) == 1
    assert verify_bundle(legacy).engine_sha256 == mnv2.engine_sha256
    raw = bytearray(legacy.read_bytes())
    raw[9] ^= 0x01  # the gzip OS byte: decompresses the same, differs from both writers
    legacy.write_bytes(bytes(raw))
    with pytest.raises(BundleIntegrityError, match="deterministic archive"):
        verify_bundle(legacy)


def test_a_changed_stored_byte_is_detected(tmp_path: Path, mnv2: Any, record_of: Any,
                                           environment: dict[str, Any]) -> None:
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment)
    raw = bytearray(info.path.read_bytes())
    at = raw.find(mnv2.engine[70000:70032])
    assert at > 0
    raw[at] ^= 0xFF
    info.path.chmod(0o644)
    info.path.write_bytes(bytes(raw))
    with pytest.raises(BundleIntegrityError):
        verify_bundle(info.path)
