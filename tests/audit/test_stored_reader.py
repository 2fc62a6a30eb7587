"""The engine's stored gzip member is read from the file's bytes, not inflated, wherever the raw reads cut it;
a member framed otherwise is still read (and refused as not canonical); a changed CRC-32 or length is refused.

Archives come from ``reference_writer`` (the format written from its RFCs), the expected hashes from hashlib and
the expected offsets from how each test builds its file.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit import tarstream
from pytest_trt.audit.tarscan import Scan, scan
from pytest_trt.errors import ArchiveError
from tests.audit.reference_writer import _deflated, _stored, reference_tar_gz, ustar

GZIP_HEADER = 10
BLOCK_HEADER = 5
FULL = 0xFFFF


class _CountingZlib:
    """``zlib`` as the reader sees it, counting the bytes zlib inflates."""

    def __init__(self) -> None:
        self.inflated = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(zlib, name)

    def decompressobj(self, *args: Any, **kwargs: Any) -> Any:
        inner, counter = zlib.decompressobj(*args, **kwargs), self

        class Counted:
            def decompress(self, data: Any, max_length: int = 0) -> bytes:
                out = inner.decompress(data, max_length)
                counter.inflated += len(out)
                return out

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Counted()


def _members(engine_size: int, *, seed: int = 7) -> dict[str, bytes]:
    rng = random.Random(seed)
    return {"build.json": b'{"a":1}\n' * 40, "engine.plan": rng.randbytes(engine_size), "z.txt": b"the end\n"}


def _scan(path: Path) -> Scan:
    return scan(path, max_size=lambda name: 1 << 30, keep=lambda name: True)


def _expect_members(found: Scan, members: dict[str, bytes]) -> None:
    assert found.sha256 == {n: hashlib.sha256(d).hexdigest() for n, d in members.items()}
    assert found.members == members


def _stored_start(members: dict[str, bytes]) -> tuple[int, bytes, bytes]:
    """Offset of the engine's gzip member in the reference file, the engine's padded data, and the tar."""
    tar, span = ustar(members)
    assert span is not None
    start, end = span
    return len(_deflated(tar[:start])), tar[start:end], tar


@pytest.mark.parametrize("read_block", [1, 4, 5, 6, 9, 10, 11, 4099, FULL + 4, FULL + 5, FULL + 6, 1 << 20])
def test_stored_blocks_are_read_raw_wherever_the_reads_cut_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                read_block: int) -> None:
    members = _members(2 * FULL + 1234)
    path = tmp_path / "b.tar.gz"
    path.write_bytes(reference_tar_gz(members))
    counting = _CountingZlib()
    monkeypatch.setattr(tarstream, "READ_BLOCK", read_block)
    monkeypatch.setattr(tarstream, "zlib", counting)
    found = _scan(path)
    assert found.canonical
    _expect_members(found, members)
    assert found.file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # zlib inflated the tar headers and the small members, never the engine's 132,304 bytes
    assert counting.inflated < 20_000, counting.inflated


@pytest.mark.parametrize("size", [0, 1, 512, 65024, 65536, FULL * 3, 200_000])
def test_engines_of_any_size_around_the_block_size_read_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            size: int) -> None:
    members = _members(size, seed=size)
    path = tmp_path / "b.tar.gz"
    path.write_bytes(reference_tar_gz(members))
    counting = _CountingZlib()
    monkeypatch.setattr(tarstream, "zlib", counting)
    found = _scan(path)
    assert found.canonical
    _expect_members(found, members)
    assert counting.inflated < 20_000, counting.inflated


@pytest.mark.parametrize("kept", [0, 1, 2])
def test_a_stored_member_reframed_part_way_is_still_read_and_not_canonical(tmp_path: Path, kept: int) -> None:
    """``kept`` canonical stored blocks, then the rest deflated with references into the data before it: a valid
    gzip member, which zlib can inflate only with that data as its window."""
    base = random.Random(3).randbytes(20_000)  # repeats within the 32 KiB window
    members = {"build.json": b"{}\n", "engine.plan": base * 10, "z.txt": b"end\n"}
    start, padded, tar = _stored_start(members)
    head = padded[: kept * FULL]
    comp = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS, **({"zdict": head[-(1 << 15):]} if kept else {}))
    rest = comp.compress(padded[kept * FULL:]) + comp.flush()
    if kept:
        with pytest.raises(zlib.error, match="distance too far back"):  # the rest needs the data before it
            zlib.decompressobj(-zlib.MAX_WBITS).decompress(rest)
    blocks = b"".join(b"\x00" + struct.pack("<HH", FULL, 0) + head[i:i + FULL] for i in range(0, len(head), FULL))
    member = _stored(b"")[:GZIP_HEADER] + blocks + rest + struct.pack("<II", zlib.crc32(padded), len(padded))
    canonical = reference_tar_gz(members)
    raw = canonical[:start] + member + canonical[start + len(_stored(padded)):]
    assert gzip.decompress(raw) == gzip.decompress(canonical) == tar  # the same tar inside
    path = tmp_path / "b.tar.gz"
    path.write_bytes(raw)
    found = _scan(path)
    _expect_members(found, members)
    at = start + GZIP_HEADER + kept * (BLOCK_HEADER + FULL)  # the first block header the writer would not write
    assert raw[:at] == canonical[:at] and raw[at:at + BLOCK_HEADER] != canonical[at:at + BLOCK_HEADER]
    assert found.first_difference == next(i for i in range(at, len(raw)) if raw[i] != canonical[i])


def test_a_stored_member_with_another_gzip_header_is_inflated_and_not_canonical(tmp_path: Path) -> None:
    members = _members(FULL + 10)
    start, _, _ = _stored_start(members)
    raw = bytearray(reference_tar_gz(members))
    assert raw[start + 9] == 0xFF
    raw[start + 9] = 3  # OS "Unix": the same data, not the writer's header
    path = tmp_path / "b.tar.gz"
    path.write_bytes(bytes(raw))
    found = _scan(path)
    _expect_members(found, members)
    assert found.first_difference == start + 9


@pytest.mark.parametrize(("field", "message"), [("data", "incorrect data check"), ("crc", "incorrect data check"),
                                                ("length", "incorrect length check")])
def test_a_stored_member_that_disagrees_with_its_trailer_is_refused(tmp_path: Path, field: str,
                                                                    message: str) -> None:
    members = _members(FULL + 10)
    start, padded, _ = _stored_start(members)
    raw = bytearray(reference_tar_gz(members))
    trailer = start + len(_stored(padded)) - 8
    at = {"data": start + GZIP_HEADER + BLOCK_HEADER + 100, "crc": trailer, "length": trailer + 4}[field]
    raw[at] ^= 0x01
    with pytest.raises(gzip.BadGzipFile):  # zlib's own reading agrees that the file is damaged
        gzip.decompress(bytes(raw))
    path = tmp_path / "b.tar.gz"
    path.write_bytes(bytes(raw))
    with pytest.raises(ArchiveError, match=message):
        _scan(path)


@pytest.mark.parametrize("cut", ["gzip header", "block header", "data", "trailer"])
def test_a_file_cut_inside_the_stored_member_is_truncated(tmp_path: Path, cut: str) -> None:
    members = _members(FULL + 10)
    start, padded, _ = _stored_start(members)
    end = start + len(_stored(padded))
    at = {"gzip header": start + 4, "block header": start + GZIP_HEADER + BLOCK_HEADER + FULL + 2,
          "data": start + GZIP_HEADER + 1000, "trailer": end - 3}[cut]
    path = tmp_path / "b.tar.gz"
    path.write_bytes(reference_tar_gz(members)[:at])
    with pytest.raises(ArchiveError, match=r"truncated file"):
        _scan(path)
