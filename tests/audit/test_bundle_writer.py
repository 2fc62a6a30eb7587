"""The bundle's write path: gathered buffers, os.writev with early writeback, the engine's CRC-32 and
the file's sha256 on threads, build.json set from the cache entry's bytes.  Every check compares with an independent
writer or reader: ``tests/audit/reference_writer.py`` (the format from its definition), :mod:`tarfile`, :mod:`gzip`,
the ``gzip`` and ``tar`` programs, and :func:`json.dumps` of the member's parts."""

from __future__ import annotations

import dataclasses
import errno
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import struct
import subprocess
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit import archive, gathered
from pytest_trt.audit import bundle as bundle_mod
from pytest_trt.audit.archive import SegmentedGzip, tar_gz_bytes, write_tar_gz
from pytest_trt.audit.bundle import BUILD, bundle_members, write_bundle
from pytest_trt.audit.gathered import Gathered, write_buffers
from pytest_trt.audit.verify import verify_bundle
from pytest_trt.common import background
from tests.audit.conftest import read_members
from tests.audit.reference_writer import reference_tar_gz

_THREADS = ("pytest-trt-bundle-prep", "pytest-trt-bundle-sha256")  # prep: the log's gzip, then the CRC
#: written by the writer before this change (commit 425920d's archive.tar_gz_bytes and gzip_bytes) from _old_inputs()
OLD_WRITER = Path(__file__).resolve().parents[1] / "data" / "bundle_writer"


def _old_inputs() -> tuple[dict[str, bytes], bytes]:
    """The members and log those samples were made from (seeded: the same bytes on every Python)."""
    rng = random.Random(14)
    engine = rng.randbytes(3 * 65535 + 1234)  # stored blocks: three full, a short last one, tar padding
    log = "".join(f"[V] [TRT] layer {i} fused with relu {rng.random():.6f}\n" for i in range(2000)).encode()
    members = {"engine.plan": engine, "build.json": b'{"bundle_schema":1}\n' * 50,
               "build.log.gz": (OLD_WRITER / "log_425920d.gz").read_bytes(), "config.json": b'{"pinned":{}}\n',
               "environment.json": b'{"schema":1}\n', "MANIFEST.sha256": b"0" * 64 + b"  x\n"}
    return members, log


def test_the_previous_writers_bytes_are_written_again(tmp_path: Path) -> None:
    """Same inputs, same bytes as before this change: on every path (in line, threaded and deferred CRC, writev)."""
    members, log = _old_inputs()
    expected = (OLD_WRITER / "archive_425920d.tar.gz").read_bytes()
    assert archive.gzip_bytes(log) == members["build.log.gz"]
    assert tar_gz_bytes(members) == expected
    crc: background.Future[int] = background.Future()
    background.on_thread("test", (crc, lambda: zlib.crc32(members["engine.plan"])), wait_start=0.001)
    out = Gathered()
    write_tar_gz(members, out, crc32={"engine.plan": crc.result})
    with open(tmp_path / "again.tar.gz", "wb") as fh:
        write_buffers(fh.fileno(), out.chunks, batch=50_000)
    assert (tmp_path / "again.tar.gz").read_bytes() == expected
    assert gathered.sha256_of(out.chunks) == hashlib.sha256(expected).hexdigest()


@pytest.fixture
def thread_names(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the threads the bundle writer starts (the real threads run)."""
    names: list[str] = []
    real = bundle_mod.on_thread

    def spy(name: str, *steps: Any, **options: Any) -> None:
        names.append(name)
        real(name, *steps, **options)

    monkeypatch.setattr(bundle_mod, "on_thread", spy)
    return names


@pytest.mark.parametrize("crc_on_thread", [True, False], ids=["crc-thread", "crc-inline"])
@pytest.mark.parametrize("batch", [None, 4096], ids=["one-writev", "writev-batches"])
def test_the_written_bytes_are_the_reference_writers(tmp_path: Path, mnv2: Any, record_of: Any,
                                                      environment: dict[str, Any], thread_names: list[str],
                                                      monkeypatch: pytest.MonkeyPatch, crc_on_thread: bool,
                                                      batch: int | None) -> None:
    # the example engine (~0.5 MB) is under the size whose CRC (and log gzip) go to threads: lower it to take that path
    monkeypatch.setattr(bundle_mod, "_CRC_ON_THREAD", 0 if crc_on_thread else 1 << 40)
    if batch is not None:
        monkeypatch.setattr(gathered, "WRITEBACK_BATCH", batch)
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment,
                        golden_results={"t::x": {"verdict": "pass"}})
    raw = info.path.read_bytes()
    members = read_members(info.path)  # tarfile, not our reader
    assert members["engine.plan"] == mnv2.engine
    # the log member holds the log, spelled independently ("[SEVERITY] " before each message's first line)
    assert gzip.decompress(members["build.log.gz"]) == "".join(f"[{e.severity}] {e.text}\n" for e in mnv2.log).encode()
    assert raw == reference_tar_gz(members)
    assert (info.sha256, info.size) == (hashlib.sha256(raw).hexdigest(), len(raw))
    assert thread_names == (list(_THREADS) if crc_on_thread else [_THREADS[1]])
    assert verify_bundle(info.path).sha256 == info.sha256


def test_a_signed_bundle_with_calibration_is_the_reference_writers_too(signed_bundle: Path) -> None:
    members = read_members(signed_bundle)
    assert {"MANIFEST.sha256.sig", "calibration.cache", "golden.json", "engine.plan"} <= set(members)
    assert signed_bundle.read_bytes() == reference_tar_gz(members)


def test_a_bundle_without_the_engine_is_one_gzip_member_as_before(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                  environment: dict[str, Any],
                                                                  thread_names: list[str]) -> None:
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment, include_engine=False)
    members = read_members(info.path)
    assert "engine.plan" not in members and info.path.read_bytes() == reference_tar_gz(members)
    assert thread_names == [_THREADS[1]]  # no engine: the log is gzipped in line, no CRC to compute


def test_standard_tools_accept_the_bundle(tmp_path: Path, mnv2: Any, record_of: Any,
                                          environment: dict[str, Any]) -> None:
    info = write_bundle(mnv2, tmp_path / "b", record=record_of(mnv2), environment=environment)
    assert tarfile.open(info.path, "r:gz").getnames() == sorted(read_members(info.path))
    assert len(gzip.decompress(info.path.read_bytes())) % tarfile.RECORDSIZE == 0
    if shutil.which("gzip") is None or shutil.which("tar") is None:
        pytest.skip("the gzip and tar programs are not installed")
    subprocess.run(["gzip", "-t", str(info.path)], check=True)
    out = tmp_path / "x"
    out.mkdir()
    subprocess.run(["tar", "xzf", str(info.path), "-C", str(out)], check=True)
    assert (out / "engine.plan").read_bytes() == mnv2.engine
    assert sorted(p.name for p in out.iterdir()) == sorted(read_members(info.path))


@pytest.mark.parametrize("size", [0, 1, 511, 512, 65023, 65024, 65535, 65536, 131070, 3 * 65535 - 512, 1_000_003])
def test_stored_member_framing_at_block_boundaries(size: int) -> None:
    engine = random.Random(size).randbytes(size)
    members = {"engine.plan": engine, "build.json": b'{"a":1}\n' * 300, "zz.json": b"z" * 700, "MANIFEST.sha256": b"m"}
    expected = reference_tar_gz(members)
    assert tar_gz_bytes(members) == expected
    given = Gathered()
    write_tar_gz(members, given, crc32={"engine.plan": zlib.crc32(engine)})  # the CRC the writer's thread computes
    assert given.getvalue() == expected
    with tarfile.open(fileobj=io.BytesIO(expected), mode="r:gz") as tar:
        assert tar.extractfile("engine.plan").read() == engine  # type: ignore[union-attr]


@pytest.mark.parametrize("size", [0, 1, 1000, 300_000])
def test_gzip_bytes_are_gzipfiles(size: int) -> None:
    """build.log.gz is made by zlib's own gzip framing now: the bytes GzipFile wrote before, OS byte included."""
    data = random.Random(size).randbytes(size // 2) + b"[V] [TRT] layer conv1 + relu1\n" * (size // 60)
    expected = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=expected, compresslevel=1, mtime=0) as gz:
        gz.write(data)
    assert archive.gzip_bytes(data) == expected.getvalue()
    assert gzip.decompress(archive.gzip_bytes(data)) == data


def test_a_crc_still_being_computed_is_waited_for_only_when_the_trailer_is_needed(tmp_path: Path) -> None:
    engine = random.Random(7).randbytes(200_001)
    members = {"engine.plan": engine, "build.json": b"{}\n", "environment.json": b"e" * 900}
    calls: list[int] = []

    def crc() -> int:
        calls.append(1)
        return zlib.crc32(engine)

    out = Gathered()
    write_tar_gz(members, out, crc32={"engine.plan": crc})
    assert calls == []  # the archive is assembled without it
    assert any(isinstance(c, gathered.Deferred) for c in out.chunks)
    target = tmp_path / "out.tar.gz"
    with open(target, "wb") as fh:
        write_buffers(fh.fileno(), out.chunks, batch=4096)
    assert calls == [1]
    assert target.read_bytes() == out.getvalue() == reference_tar_gz(members)
    assert calls == [1]  # made once, kept
    assert tar_gz_bytes(members) == reference_tar_gz(members)
    plain = io.BytesIO()  # a file object without write_deferred: the trailer is made at once
    write_tar_gz(members, plain, crc32={"engine.plan": crc})
    assert plain.getvalue() == reference_tar_gz(members) and calls == [1, 1]


def test_a_known_crc_is_refused_after_the_first_stored_bytes() -> None:
    gz = SegmentedGzip(Gathered())
    gz.begin_stored(1024)
    gz.write_stored(b"a" * 512)
    with pytest.raises(ValueError, match="first bytes"):
        gz.write_stored(b"b" * 512, crc32=0)


def test_a_whole_members_crc_given_at_its_start_is_the_one_in_its_trailer() -> None:
    data = bytes(range(256)) * 300  # two stored blocks
    out = io.BytesIO()
    gz = SegmentedGzip(out)
    calls: list[int] = []
    gz.begin_stored(len(data), crc32=lambda: calls.append(1) or 0x12345678)
    gz.write_stored(data[:1000])
    gz.write_stored(data[1000:])
    raw = out.getvalue()
    assert calls == [1] and raw[-8:] == struct.pack("<II", 0x12345678, len(data))  # not computed here
    assert zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw[10:-8]) == data
    other = SegmentedGzip(io.BytesIO())
    other.begin_stored(10, crc32=lambda: 0)
    with pytest.raises(ValueError, match="first bytes"):  # one CRC per member
        other.write_stored(b"x" * 10, crc32=0)


def test_gathered_keeps_immutable_buffers_and_copies_writable_ones() -> None:
    data = b"x" * 100
    mutable = bytearray(b"abc")
    out = Gathered()
    out.write(memoryview(data)[10:20])
    out.write(mutable)
    out.write(b"")
    mutable[:] = b"XYZ"  # its writer reuses the buffer
    assert out.getvalue() == b"x" * 10 + b"abc" and out.size == 13 and len(out.chunks) == 2
    assert out.chunks[0].obj is data  # type: ignore[union-attr]  # a view of the engine's bytes, not a copy


def _chunks(seed: int) -> list[bytes | memoryview]:
    rng = random.Random(seed)
    big = rng.randbytes(300_000)
    out: list[bytes | memoryview] = []
    for _ in range(2500):  # more than IOV_MAX (1024 on Linux): several writev calls
        n = rng.choice([0, 1, 5, 512, 4096, 65535])
        start = rng.randrange(0, len(big) - n + 1)
        out.append(memoryview(big)[start:start + n] if rng.random() < 0.5 else big[start:start + n])
    return out


@pytest.mark.parametrize("batch", [None, 1 << 40], ids=["default-batches", "one-batch-over-iov-max"])
def test_write_buffers_writes_every_chunk_in_order(tmp_path: Path, batch: int | None) -> None:
    chunks = _chunks(1)
    target = tmp_path / "out"
    with open(target, "wb") as fh:
        write_buffers(fh.fileno(), chunks, batch=batch)
    assert target.read_bytes() == b"".join(chunks)


def test_write_buffers_resumes_after_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel may write less than asked (a signal, the last bytes of a full disk): the rest must follow."""
    real = os.writev
    calls = []

    def short_writev(fd: int, buffers: list[Any]) -> int:
        take, left = [], 1000  # at most 1000 bytes per call, often ending inside a chunk
        for b in buffers:
            view = memoryview(b)[:left]
            take.append(view)
            left -= view.nbytes
            if not left:
                break
        calls.append(len(buffers))
        return real(fd, take)

    monkeypatch.setattr(os, "writev", short_writev)
    chunks = _chunks(2)
    target = tmp_path / "out"
    with open(target, "wb") as fh:
        write_buffers(fh.fileno(), chunks)
    assert len(calls) > 100  # positive control: the short writes happened
    assert target.read_bytes() == b"".join(chunks)


def test_write_buffers_starts_writeback_after_each_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = gathered._start_writeback
    ranges: list[tuple[int, int, bool]] = []

    def spy(fd: int, offset: int, length: int) -> bool:
        accepted = real(fd, offset, length)
        ranges.append((offset, length, accepted))
        return accepted

    monkeypatch.setattr(gathered, "_start_writeback", spy)
    chunks = _chunks(3)
    total = sum(memoryview(c).nbytes for c in chunks)
    with open(tmp_path / "out", "wb") as fh:
        write_buffers(fh.fileno(), chunks, batch=64 << 10)
    assert all(length >= 64 << 10 for _, length, _ in ranges)
    assert [o for o, _, _ in ranges] == [0] + [o + n for o, n, _ in ranges[:-1]]  # contiguous from the start
    end = ranges[-1][0] + ranges[-1][1]
    assert total - (64 << 10) - 65535 < end <= total  # only the last, partial batch is left to the fsync
    if os.uname().sysname == "Linux":
        assert all(accepted for _, _, accepted in ranges)  # a real sync_file_range on a regular file


def test_a_failed_write_raises_and_keeps_the_previous_bundle(tmp_path: Path, mnv2: Any, record_of: Any,
                                                            environment: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    first = write_bundle(mnv2, tmp_path, record=None, environment=environment)
    before = first.path.read_bytes()
    monkeypatch.setattr(bundle_mod, "_CRC_ON_THREAD", 0)
    futures: list[Any] = []
    real_init = background.Future.__init__

    def track(self: Any) -> None:
        real_init(self)
        futures.append(self)

    monkeypatch.setattr(background.Future, "__init__", track)

    def disk_full(fd: int, chunks: Any, **options: Any) -> None:
        os.write(fd, bytes(chunks[0])[:100])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(gathered, "write_buffers", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment)
    assert first.path.read_bytes() == before
    assert not list(tmp_path.glob(".*.tmp"))
    assert len(futures) == 3 and futures[-1].done()  # log gzip, CRC, and the file's sha256, waited for


def _canonical(data: Any, *, ascii_only: bool) -> bytes:
    """Canonical JSON spelled independently: sorted keys, compact, UTF-8 when there is non-ASCII text."""
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only) + "\n").encode()


@pytest.mark.parametrize("include_engine", [True, False])
@pytest.mark.parametrize("with_record", [True, False])
def test_build_json_is_the_canonical_json_of_its_parts(mnv2: Any, record_of: Any, environment: dict[str, Any],
                                                       include_engine: bool, with_record: bool) -> None:
    record = record_of(mnv2) if with_record else None
    got = bundle_members(mnv2, record=record, environment=environment, include_engine=include_engine)[BUILD]
    whole = {"bundle_schema": 1, "engine_included": include_engine, "build": mnv2.build_json(),
             "record": record.to_dict() if record is not None else None}
    assert b"\\u" not in got  # the ASCII case: the cache entry's bytes are set into the member
    assert got == _canonical(whole, ascii_only=True)


@pytest.mark.parametrize("where", ["build", "record"])
def test_build_json_with_non_ascii_text_is_spelled_in_utf8(mnv2: Any, record_of: Any, environment: dict[str, Any],
                                                           where: str) -> None:
    from pytest_trt.buildlog.record import BuildRecord

    result, record = mnv2, record_of(mnv2)
    if where == "build":
        result = dataclasses.replace(mnv2, device={**mnv2.device, "name": "Gerät Ω"})
    else:
        record = BuildRecord.from_dict({**record.to_dict(), "tool": "trtexec – Ω"})
    got = bundle_members(result, record=record, environment=environment)[BUILD]
    whole = {"bundle_schema": 1, "engine_included": True, "build": result.build_json(), "record": record.to_dict()}
    assert got == _canonical(whole, ascii_only=False)
    assert ("Gerät Ω" if where == "build" else "trtexec – Ω").encode() in got  # positive control


def test_the_bundle_and_the_cache_entry_share_build_json_bytes(tmp_path: Path, mnv2: Any, record_of: Any,
                                                               environment: dict[str, Any]) -> None:
    fresh = dataclasses.replace(mnv2)  # nothing memoised yet
    first = fresh.build_json_bytes()
    assert fresh.build_json_bytes() is first  # made once per result
    fresh.write(tmp_path / "entry")
    on_disk = (tmp_path / "entry" / "build.json").read_bytes()
    assert on_disk == first == _canonical(fresh.build_json(), ascii_only=True)
    member = bundle_members(fresh, record=record_of(fresh), environment=environment)[BUILD]
    assert json.loads(member)["build"] == json.loads(on_disk)


def test_a_rewrite_for_new_golden_verdicts_takes_the_threads_too(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                 environment: dict[str, Any], thread_names: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_mod, "_CRC_ON_THREAD", 0)
    kwargs: dict[str, Any] = dict(record=record_of(mnv2), environment=environment, reuse=True)
    first = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "pass"}}, **kwargs)
    del thread_names[:]
    second = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "pass"}, "t::b": {"verdict": "fail"}},
                          **kwargs)
    assert second.sha256 != first.sha256
    assert thread_names == list(_THREADS)
    members = read_members(second.path)
    assert json.loads(members["golden.json"])["checks"] == {"t::a": {"verdict": "pass"}, "t::b": {"verdict": "fail"}}
    assert second.path.read_bytes() == reference_tar_gz(members)


def test_an_identical_bundle_kept_starts_no_thread(tmp_path: Path, mnv2: Any, record_of: Any,
                                                  environment: dict[str, Any], thread_names: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache hit's first session builds the members to compare manifests: no CRC or gzip spent on other cores."""
    monkeypatch.setattr(bundle_mod, "_CRC_ON_THREAD", 0)
    kwargs: dict[str, Any] = dict(record=record_of(mnv2), environment=environment, reuse=True,
                                  golden_results={"t::a": {"verdict": "pass"}})
    first = write_bundle(mnv2, tmp_path, **kwargs)
    assert thread_names == list(_THREADS)  # positive control: the first write used them
    del thread_names[:]
    again = write_bundle(mnv2, tmp_path, **kwargs)
    assert again.sha256 == first.sha256 and thread_names == []


def test_without_threads_to_be_had_the_work_is_done_in_line(tmp_path: Path, mnv2: Any, record_of: Any,
                                                            environment: dict[str, Any],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import _thread

    monkeypatch.setattr(bundle_mod, "_CRC_ON_THREAD", 0)
    refused: list[int] = []

    def no_thread(*args: Any) -> None:
        refused.append(1)
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_thread, "start_new_thread", no_thread)
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment)
    assert refused == [1, 1]  # the prep work and the file's sha256 both asked for a thread
    raw = info.path.read_bytes()
    assert raw == reference_tar_gz(read_members(info.path))
    assert info.sha256 == hashlib.sha256(raw).hexdigest()
