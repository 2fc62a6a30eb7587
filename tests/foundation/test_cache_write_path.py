"""The cache entry's write path: a large engine is written on its own thread beside the log and JSON files, and
its sha256 starts on the builder's buffer when the build returns.  What must hold: the entry is published
(renamed into place) only once the engine file is whole, a failed engine write publishes nothing and is
reported, the digest is the engine's sha256 (checked with hashlib, independently), one digest per build, and
the builder's buffer is let go once hashed."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from pytest_trt.artifact import ENGINE_FILE
from pytest_trt.common import filehash, fileio
from pytest_trt.common.filehash import HASH_THREAD_BYTES, EngineDigest
from pytest_trt.engines.cache import EngineCache
from tests.conftest import needs_rtx

KEY = "c3" * 32


@pytest.fixture(scope="module")
def large_result():
    """A real build's evidence with an engine large enough to be written on its own thread."""
    from tests.audit.rtx_build import build_small

    engine = os.urandom(HASH_THREAD_BYTES + 12345)
    return dataclasses.replace(build_small(), engine=engine)


def _slow_engine_write(monkeypatch: pytest.MonkeyPatch, *, delay: float = 0.3) -> list[str]:
    """Delay the engine file's write (only it), so an entry renamed before that write ends would lack it."""
    real = fileio._write_new
    threads: list[str] = []

    def slow(path: Path, data: bytes) -> None:
        if path.name == ENGINE_FILE:
            threads.append(threading.current_thread().name)
            time.sleep(delay)
        real(path, data)

    monkeypatch.setattr(fileio, "_write_new", slow)
    return threads


@needs_rtx
def test_an_entry_is_published_only_with_its_whole_engine(tmp_path, large_result, monkeypatch):
    threads = _slow_engine_write(monkeypatch)
    cache = EngineCache(tmp_path)
    main = threading.current_thread().name
    folder = cache.store(KEY, large_result)
    assert threads and threads[0] != main, "a large engine is written on a thread of its own"
    engine = (folder / ENGINE_FILE).read_bytes()
    assert engine == large_result.engine
    entry = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
    assert entry["files"][ENGINE_FILE] == hashlib.sha256(engine).hexdigest()
    for name in ("build.log", "config.json", "build.json"):
        assert entry["files"][name] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    monkeypatch.undo()
    loaded = cache.load(KEY)
    assert loaded is not None and loaded.engine == large_result.engine
    assert not list((tmp_path / "tmp").iterdir()), "no staging folder is left behind"


@needs_rtx
def test_a_failed_engine_write_publishes_nothing_and_is_reported(tmp_path, large_result, monkeypatch):
    real = fileio._write_new

    def full_disk(path: Path, data: bytes) -> None:
        if path.name == ENGINE_FILE:
            time.sleep(0.1)  # fails after the other files were written
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(fileio, "_write_new", full_disk)
    cache = EngineCache(tmp_path)
    with pytest.raises(OSError, match="No space left on device"):
        cache.store(KEY, large_result)
    assert not cache.entry_dir(KEY).exists()
    assert not list((tmp_path / "tmp").iterdir()), "the staging folder is removed"
    errors: list[str] = []
    lock = cache.acquire(KEY)
    cache.write_entry(KEY, large_result, lock, errors)
    assert len(errors) == 1 and "was not written" in errors[0] and "No space left on device" in errors[0]
    assert not cache.entry_dir(KEY).exists()


def test_a_digest_lets_the_buffer_it_hashed_go():
    data = bytearray(os.urandom(1 << 20))
    digest = EngineDigest(memoryview(data))
    assert digest.hexdigest() == hashlib.sha256(bytes(data)).hexdigest()
    data.extend(b"x")  # BufferError while a view of it is still held


def _example_config(tmp_path: Path):
    from examples.models import write_all
    from pytest_trt.config import BuildConfig, Profile

    onnx = write_all(tmp_path / "models")["mobilenet_v2"]
    return BuildConfig(name="mnv2", onnx=onnx, profiles=[Profile(input=((1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32)))])


@needs_rtx
def test_a_real_build_starts_one_digest_on_the_builders_buffer(tmp_path, monkeypatch):
    from pytest_trt.backends.registry import create_backend

    config = _example_config(tmp_path)
    backend = create_backend("tensorrt-rtx")
    backend.build_config(config)  # warm: the backend's modules load outside the count
    real = filehash.on_thread
    names: list[str] = []
    waits: list[float] = []

    def counting(name, *steps, **kwargs):
        names.append(name)
        waits.append(kwargs.get("wait_start", 0.0))
        return real(name, *steps, **kwargs)

    monkeypatch.setattr(filehash, "on_thread", counting)
    result = backend.build_config(config)
    assert names.count("engine-sha256") == 1, names
    # the build goes on holding the GIL (returning, starting the cache writer, the test): it waits for the hash to begin
    assert waits[names.index("engine-sha256")] > 0
    assert result.engine_sha256 == hashlib.sha256(result.engine).hexdigest()


@needs_rtx
def test_build_json_encoded_beside_the_digest_holds_the_engines_sha256(tmp_path, large_result):
    result = dataclasses.replace(large_result)  # a fresh result: its digest starts when the entry is written
    assert result.pending_engine_digest() is None and "engine_sha256" not in result.__dict__
    folder = EngineCache(tmp_path).store(KEY, result)
    data = (folder / "build.json").read_bytes()
    build = json.loads(data)
    assert build["engine_sha256"] == hashlib.sha256(large_result.engine).hexdigest()
    assert build["engine_bytes"] == len(large_result.engine)
    # the same bytes as encoding the finished dict in one go (compact, sorted keys, one newline)
    assert data == (json.dumps(build, sort_keys=True, separators=(",", ":")) + "\n").encode()
    assert data == result.build_json_bytes() == result.members().build_json


@needs_rtx
def test_a_build_returns_before_copying_its_engine(tmp_path):
    """The engine stays in the builder's buffer: the cache entry is written from that buffer, and the engine's bytes
    are made when first used.  (Its log: tests/foundation/test_log_conversion.py.)"""
    from pytest_trt.backends.registry import create_backend

    result = create_backend("tensorrt-rtx").build_config(_example_config(tmp_path))
    assert isinstance(result.engine_buffer(), memoryview), "the build copied its engine before returning"
    folder = EngineCache(tmp_path / "cache").store(KEY, result)
    assert isinstance(result.engine_buffer(), memoryview), "the cache entry was written from a copy"
    on_disk = (folder / ENGINE_FILE).read_bytes()
    entry = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
    assert entry["files"][ENGINE_FILE] == hashlib.sha256(on_disk).hexdigest() == result.engine_sha256
    text = (folder / "build.log").read_text(encoding="utf-8")
    # each message opens one line with its severity, as an independent regex reads build.log
    opened = re.findall(r"^\[(?:INTERNAL_ERROR|ERROR|WARNING|INFO|VERBOSE)\] ", text, flags=re.M)
    assert len(result.log) == len(opened) > 100 and result.log_text() == text
    data = result.engine
    assert type(data) is bytes and data == on_disk and result.engine is data
    assert type(result.engine_buffer()) is bytes, "the builder's buffer is kept beside its copy"


@needs_rtx
def test_a_fresh_builds_bundle_is_written_from_the_builders_buffer(tmp_path):
    import tarfile

    from pytest_trt.audit.bundle import bundle_members, write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.backends.registry import create_backend

    result = create_backend("tensorrt-rtx").build_config(_example_config(tmp_path))
    environment = capture_environment(backend="tensorrt-rtx", rootdir=None)
    info = write_bundle(result, tmp_path / "bundles", record=None, environment=environment)
    assert isinstance(result.engine_buffer(), memoryview), "the bundle was written from a copy of the engine"
    assert verify_bundle(info.path).sha256 == hashlib.sha256(info.path.read_bytes()).hexdigest()
    with tarfile.open(info.path) as tar:
        member = tar.extractfile("engine.plan")
        assert member is not None
        engine = member.read()
    assert hashlib.sha256(engine).hexdigest() == result.engine_sha256 and engine == bytes(result.engine_buffer())
    members = bundle_members(result, record=None, environment=environment)  # the public form: bytes, as documented
    assert type(members["engine.plan"]) is bytes and members["engine.plan"] == engine
