"""The cache's own integrity checks, each on a damage that only it can catch (found by scripts/mutate.py):
a log edited but still well-formed, and an entry copied under another key."""

from __future__ import annotations

import pickle
import shutil

import pytest

from pytest_trt.engines.cache import EngineCache
from pytest_trt.errors import CacheCorrupt
from tests.conftest import needs_rtx

pytestmark = needs_rtx

KEY_A, KEY_B = "a1" * 32, "b2" * 32


@pytest.fixture(scope="module")
def result():
    from tests.audit.rtx_build import build_small

    return build_small()


def test_an_edited_but_well_formed_log_is_refused(tmp_path, result):
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    assert cache.load(KEY_A) is not None  # positive control
    log = (folder / "build.log").read_text(encoding="utf-8")
    assert "[VERBOSE]" in log
    (folder / "build.log").write_text(log.replace("[VERBOSE]", "[INFO]", 1), encoding="utf-8")
    with pytest.raises(CacheCorrupt, match=f"engine cache entry {folder} is corrupt \\(build.log does not match its "
                                           "sha256\\); it will be rebuilt"):
        cache.load(KEY_A)


def test_an_entry_copied_under_another_key_is_refused(tmp_path, result):
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    other = cache.entry_dir(KEY_B)
    other.parent.mkdir(parents=True)
    shutil.copytree(folder, other)
    with pytest.raises(CacheCorrupt, match=r"is corrupt \(entry.json names another key\)"):
        cache.load(KEY_B)


def test_a_cache_hit_keeps_the_log_as_text_until_used_and_then_gives_every_entry(tmp_path, result):
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    loaded = cache.load(KEY_A)
    assert loaded is not None
    assert "log" not in loaded.__dict__  # not split on the hit
    # what the lazy result serves before its entries exist equals what the built result wrote
    assert loaded.log_text() == (folder / "build.log").read_text(encoding="utf-8") == result.log_text()
    assert loaded.build_json() == result.build_json()
    # first use fills it: every entry, as built (a separate count from the file: one [SEVERITY] per entry)
    assert len(loaded.log) == (folder / "build.log").read_text(encoding="utf-8").count("\n[") + 1
    assert loaded.log == result.log and loaded == result
    assert loaded.log is loaded.log  # split once
    assert pickle.loads(pickle.dumps(loaded)).log == result.log
    with pytest.raises(AttributeError, match="no attribute 'lgo'"):
        loaded.lgo  # noqa: B018  (other names are not served by the lazy log)


def _engine_hashes(monkeypatch, engine: bytes) -> list[int]:  # type: ignore[no-untyped-def]
    """Counts the sha256 objects made over the engine's bytes while a cache entry is read."""
    import hashlib

    from pytest_trt import artifact
    from pytest_trt.common import filehash

    calls: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> object:
        if len(data) == len(engine):
            calls.append(1)
        return real(data)

    monkeypatch.setattr(artifact.hashlib, "sha256", counting)
    monkeypatch.setattr(filehash, "HASH_THREAD_BYTES", 1 << 40)  # inline, where the count sees it
    return calls


def test_a_hit_stamps_the_engine_and_the_next_hit_takes_its_digest_without_hashing(tmp_path, result, monkeypatch):
    import hashlib
    import json

    from pytest_trt.common import filehash

    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))  # stamp a file written just now
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    expected = hashlib.sha256(result.engine).hexdigest()  # before the count starts (it patches hashlib itself)
    calls = _engine_hashes(monkeypatch, result.engine)
    assert cache.load(KEY_A) is not None and calls == [1]  # verified by hashing, then stamped
    stamp = json.loads((folder / "engine.plan.verified").read_text())
    st = (folder / "engine.plan").stat()
    assert stamp == {"identity": [str(folder / "engine.plan"), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
                     "sha256": expected}
    assert (folder / "engine.plan").read_bytes() == result.engine
    loaded = cache.load(KEY_A)
    assert loaded is not None and calls == [1]  # the stamp's digest: not hashed again
    assert loaded.engine_sha256 == expected and loaded == result


def test_an_engine_edited_in_place_after_its_stamp_is_hashed_again_and_refused(tmp_path, result, monkeypatch):
    import os

    from pytest_trt.common import filehash

    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    assert cache.load(KEY_A) is not None and (folder / "engine.plan.verified").is_file()
    engine = folder / "engine.plan"
    st = engine.stat()
    with open(engine, "r+b") as fh:  # one byte, same size, mtime put back: only ctime shows the edit
        fh.seek(st.st_size // 2)
        byte = fh.read(1)
        fh.seek(st.st_size // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.utime(engine, ns=(st.st_atime_ns, st.st_mtime_ns))
    calls = _engine_hashes(monkeypatch, result.engine)
    with pytest.raises(CacheCorrupt, match=r"is corrupt \(engine.plan does not match its sha256\)"):
        cache.load(KEY_A)
    assert calls == [1]


def test_a_stamped_hit_reads_its_engine_only_when_used_and_checks_it_then(tmp_path, result, monkeypatch):
    """A hit whose engine nothing runs never reads the engine file; the first use reads it and refuses a file that
    changed since it was verified (a same-size edit in place: its bytes no longer hash to the stamp)."""
    from pytest_trt.common import filehash

    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    assert cache.load(KEY_A) is not None and (folder / "engine.plan.verified").is_file()  # stamped
    reads: list[str] = []
    real = filehash.read_with_identity

    def counting(path):  # type: ignore[no-untyped-def]
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(filehash, "read_with_identity", counting)
    hit = cache.load(KEY_A)
    assert hit is not None and reads == []  # the stamp's digest: the engine file is not read
    assert hit.engine == result.engine and reads == ["engine.plan"]  # read on first use, once
    assert hit.engine == result.engine and reads == ["engine.plan"]
    later = cache.load(KEY_A)
    assert later is not None
    plan = folder / "engine.plan"
    data = bytearray(plan.read_bytes())
    data[len(data) // 2] ^= 0xFF
    plan.write_bytes(bytes(data))  # same size, in place: a new ctime
    with pytest.raises(CacheCorrupt, match=r"cached engine .*engine\.plan: .*changed after it was verified.*"
                                           r"--trt-rebuild"):
        _ = later.engine


def test_a_released_engine_is_read_again_on_use_and_a_built_one_is_kept(tmp_path, result, monkeypatch):
    from pytest_trt.common import filehash

    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))
    cache = EngineCache(tmp_path)
    cache.store(KEY_A, result)
    assert cache.load(KEY_A) is not None  # stamped
    hit = cache.load(KEY_A)
    assert hit is not None and hit.engine == result.engine
    reads: list[str] = []
    real = filehash.read_with_identity
    monkeypatch.setattr(filehash, "read_with_identity", lambda path: reads.append(path.name) or real(path))
    hit.release_engine()
    assert reads == [] and hit.engine == result.engine and reads == ["engine.plan"]  # read again, on use
    built = result  # made by a build: nothing to read it back from
    built.release_engine()
    assert "engine" in built.__dict__ and built.engine == result.engine


def test_a_stamped_hit_reads_its_log_only_when_used_and_checks_it_then(tmp_path, result, monkeypatch):
    """build.log is stamped like the engine: a later hit reads it only when the log is used, and refuses a log
    edited since it was verified (same size, in place: only its ctime shows)."""
    import hashlib
    import json

    from pytest_trt.common import filehash

    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))
    cache = EngineCache(tmp_path)
    folder = cache.store(KEY_A, result)
    assert cache.load(KEY_A) is not None  # verified by hashing, then stamped
    path = folder / "build.log"
    st = path.stat()
    assert json.loads((folder / "build.log.verified").read_text()) == {
        "identity": [str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino],
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    reads: list[str] = []
    real = filehash.read_with_identity
    monkeypatch.setattr(filehash, "read_with_identity", lambda p: reads.append(p.name) or real(p))
    hit = cache.load(KEY_A)
    assert hit is not None and "build.log" not in reads
    assert hit.log_text() == path.read_text(encoding="utf-8") == result.log_text() and reads.count("build.log") == 1
    assert hit.log == result.log and reads.count("build.log") == 1  # read once
    later = cache.load(KEY_A)
    assert later is not None
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("[VERBOSE]", "[VERBOSX]", 1), encoding="utf-8")  # same size
    with pytest.raises(CacheCorrupt, match=r"cached build log .*build\.log: .*changed after it was verified.*"
                                           r"--trt-rebuild"):
        later.log  # noqa: B018
    with pytest.raises(CacheCorrupt, match=r"is corrupt \(build.log does not match its sha256\)"):
        cache.load(KEY_A)  # the next session: hashed again at load, refused
