"""Engine cache: miss then hit, corrupt entries rebuilt, concurrent processes build a key once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt import BuildConfig, BuildFailed, Profile
from pytest_trt.engines.provider import EngineNotBuilt, EngineProvider
from pytest_trt.testing import SpyBackend
from tests.conftest import needs_rtx

pytestmark = needs_rtx

DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))


def rtx_spy() -> SpyBackend:
    """The real TensorRT-RTX backend, counting how often the builder runs."""
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return SpyBackend(TensorRTBackend("tensorrt_rtx"))


@pytest.fixture
def config(models):
    return BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])


def provider(tmp_path, backend, **kw):
    kw.setdefault("build", True)
    return EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", backend=backend, **kw)


def test_miss_then_hit_without_calling_the_builder(tmp_path, config):
    backend = rtx_spy()
    first = provider(tmp_path, backend).get(config)
    assert backend.builds == 1 and not first.cached
    second = provider(tmp_path, backend).get(config)  # a new session: from disk
    assert backend.builds == 1 and second.cached
    assert second.result == first.result
    same_session = provider(tmp_path, backend)
    assert same_session.get(config) is same_session.get(config)


def test_changed_config_is_a_miss_and_rebuild_ignores_hits(tmp_path, config):
    backend = rtx_spy()
    provider(tmp_path, backend).get(config)
    provider(tmp_path, backend).get(config.replace(builder_optimization_level=1))
    assert backend.builds == 2
    rebuilt = provider(tmp_path, backend, rebuild=True).get(config)
    assert backend.builds == 3 and not rebuilt.cached


def test_not_cached_and_build_not_allowed_names_the_flag(tmp_path, config):
    with pytest.raises(EngineNotBuilt, match="run pytest with --trt-engine-build to build it"):
        provider(tmp_path, rtx_spy(), build=False).get(config)


@pytest.mark.parametrize("damage", ["flip engine byte", "truncate log", "drop entry.json", "garbage entry.json",
                                    "edit config.json", "flip engine byte, keep build.json in step"])
def test_corrupt_entry_is_rebuilt_never_used(tmp_path, config, damage):
    backend = rtx_spy()
    first = provider(tmp_path, backend)
    engine = first.get(config)
    assert first.flush() == []
    folder = engine.artifact_dir
    if damage == "flip engine byte":
        data = bytearray((folder / "engine.plan").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / "engine.plan").write_bytes(bytes(data))
    elif damage == "truncate log":
        (folder / "build.log").write_bytes((folder / "build.log").read_bytes()[:100])
    elif damage == "drop entry.json":
        (folder / "entry.json").unlink()
    elif damage == "edit config.json":  # still valid JSON: only its sha256 in entry.json tells
        text = (folder / "config.json").read_text(encoding="utf-8")
        (folder / "config.json").write_text(text.replace('"pinned"', '"pinned" ', 1), encoding="utf-8")
    elif damage == "flip engine byte, keep build.json in step":  # only entry.json's engine digest tells
        import hashlib

        data = bytearray((folder / "engine.plan").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (folder / "engine.plan").write_bytes(bytes(data))
        build = json.loads((folder / "build.json").read_text(encoding="utf-8"))
        build["engine_sha256"] = hashlib.sha256(bytes(data)).hexdigest()
        (folder / "build.json").write_text(json.dumps(build), encoding="utf-8")
        entry = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
        entry["files"]["build.json"] = hashlib.sha256((folder / "build.json").read_bytes()).hexdigest()
        (folder / "entry.json").write_text(json.dumps(entry), encoding="utf-8")
    else:
        (folder / "entry.json").write_text("{not json", encoding="utf-8")
    messages = []
    p = provider(tmp_path, backend, on_progress=messages.append)
    again = p.get(config)
    assert backend.builds == 2 and not again.cached
    assert p.events[0].status == "rebuilt-corrupt"
    assert any("is corrupt" in m and "rebuilt" in m for m in messages)
    assert len(list((tmp_path / "cache" / "corrupt").iterdir())) == 1
    assert again.result.engine == engine.result.engine


def test_half_written_entry_is_never_seen(tmp_path, config):
    backend = rtx_spy()
    p = provider(tmp_path, backend)
    key = p.key_for(config)
    # a crashed writer leaves only a temporary folder behind
    leftover = tmp_path / "cache" / "tmp" / f"{key}.999.deadbeef"
    leftover.mkdir(parents=True)
    (leftover / "engine.plan").write_bytes(b"partial")
    engine = p.get(config)
    assert backend.builds == 1 and engine.result.engine != b"partial"


def test_entry_is_written_behind_the_test_and_waited_for(tmp_path, config):
    backend = rtx_spy()
    p = provider(tmp_path, backend)
    engine = p.get(config)  # returns at once; a thread writes the entry while holding the key's lock
    assert engine.result.engine and p.flush() == []
    assert (engine.artifact_dir / "entry.json").is_file() and not list((tmp_path / "cache" / "tmp").iterdir())
    assert provider(tmp_path, backend, build=False).get(config).cached


def test_a_cache_write_failure_is_reported_not_hidden(tmp_path, config):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "tmp").write_text("a file where the temporary folder should go")
    p = provider(tmp_path, rtx_spy())
    engine = p.get(config)
    errors = p.flush()
    assert engine.result.engine  # the engine in memory is still valid for this session
    assert len(errors) == 1 and "was not written" in errors[0] and str(engine.artifact_dir) in errors[0]
    assert not (engine.artifact_dir / "entry.json").exists()


def test_failed_build_keeps_its_log(tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x08\x07not really onnx")
    with pytest.raises(BuildFailed) as info:
        provider(tmp_path, rtx_spy()).get(BuildConfig(name="garbage", onnx=bad))
    log_path = info.value.log_path
    assert log_path is not None and log_path.is_file()
    assert "[ERROR] (deserializeOnnxModel): MODEL_DESERIALIZE_FAILED" in log_path.read_text(encoding="utf-8")
    assert f"Full build log: {log_path}" in str(info.value)


RACE = textwrap.dedent(
    """
    import json, sys, time
    from pytest_trt import BuildConfig, Profile
    from pytest_trt.engines.provider import EngineProvider
    cfg = BuildConfig(name="cbr", onnx=sys.argv[1], profiles=[Profile(input=((1,3,16,16),(2,3,16,16),(4,3,16,16)))])
    p = EngineProvider("tensorrt-rtx", cache_dir=sys.argv[2], build=True)
    p.backend.version()  # import TensorRT before the start line, so both race on the lock
    while time.time() < float(sys.argv[3]):
        time.sleep(0.001)
    e = p.get(cfg)
    errors = p.flush()  # a cache entry that could not be written lets the other process build too: say why
    print(json.dumps({"status": p.events[0].status, "sha": e.result.engine_sha256, "errors": errors,
                      "key": p.key_for(cfg)}))
    """
)


def test_two_processes_racing_on_one_key_build_once(tmp_path, config):
    import time

    script = tmp_path / "race.py"
    script.write_text(RACE, encoding="utf-8")
    start = str(time.time() + 4.0)
    root = Path(__file__).resolve().parents[2]
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(config.onnx), str(tmp_path / "cache"), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        for _ in range(2)
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(o["status"] for o in outs) == ["built", "cached"], outs
    assert outs[0]["sha"] == outs[1]["sha"]
