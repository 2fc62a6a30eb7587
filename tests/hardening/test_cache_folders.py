"""Engine cache folders: read-only caches serve hits, unusable folders give one clear error."""

from __future__ import annotations

import shutil
import textwrap

import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.engines.provider import EngineNotBuilt, EngineProvider
from pytest_trt.errors import FolderUnusable
from tests.conftest import needs_rtx
from tests.hardening import unprivileged

pytestmark = needs_rtx
DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))

LOOKUP = """
from pathlib import Path
from pytest_trt import BuildConfig, Profile
from pytest_trt.engines.provider import EngineProvider
from pytest_trt.errors import TrtError
dyn = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))
cfg = BuildConfig(name="cbr", onnx=Path({onnx!r}), profiles=[dyn]{extra})
p = EngineProvider("tensorrt-rtx", cache_dir=Path({cache!r}), build={build})
try:
    e = p.get(cfg)
    print("CACHED" if e.cached else "BUILT", len(e.result.engine))
except TrtError as exc:
    print(type(exc).__name__ + ":", exc.message)
"""


@pytest.fixture
def shared(models):
    """A world-readable folder holding the model and a cache with its engine, then made read-only."""
    folder = unprivileged.world_dir()
    onnx = folder / "cbr.onnx"
    shutil.copyfile(models["conv_bn_relu"], onnx)
    onnx.chmod(0o644)
    cache = folder / "cache"
    # built by the same user and interpreter that looks it up (the cache key holds the Python version)
    out = unprivileged.run(LOOKUP.format(onnx=str(onnx), cache=str(cache), build=True, extra=""), cwd=folder)
    assert out.stdout.startswith("BUILT "), out.stdout + out.stderr
    shutil.rmtree(cache / "locks")
    unprivileged.make_read_only(cache)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("build", [False, True])
def test_read_only_cache_serves_hits_without_creating_a_lock(shared, build):
    code = LOOKUP.format(onnx=str(shared / "cbr.onnx"), cache=str(shared / "cache"), build=build, extra="")
    out = unprivileged.run(code, cwd=shared)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("CACHED "), out.stdout + out.stderr
    assert not (shared / "cache" / "locks").exists()


def test_read_only_cache_miss_with_build_names_the_folder_and_the_fix(shared):
    code = LOOKUP.format(
        onnx=str(shared / "cbr.onnx"), cache=str(shared / "cache"), build=True, extra=", builder_optimization_level=1"
    )
    out = unprivileged.run(code, cwd=shared)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    line = out.stdout.strip()
    assert line.startswith(f"FolderUnusable: engine cache {shared / 'cache'} is not writable (Permission denied")
    assert "point --trt-cache-dir / trt_cache_dir at a writable folder" in line
    assert "without --trt-engine-build" in line


def test_read_only_cache_miss_without_build_is_not_built(shared):
    code = LOOKUP.format(
        onnx=str(shared / "cbr.onnx"), cache=str(shared / "cache"), build=False, extra=", builder_optimization_level=1"
    )
    out = unprivileged.run(code, cwd=shared)
    assert out.stdout.startswith("EngineNotBuilt: engine 'cbr' (tensorrt-rtx) is not in the cache"), out.stdout


@pytest.mark.parametrize("build", [False, True])
def test_cache_dir_that_is_a_file(tmp_path, models, build):
    cache = tmp_path / "cache"
    cache.write_text("not a folder")
    p = EngineProvider("tensorrt-rtx", cache_dir=cache, build=build)
    with pytest.raises(FolderUnusable) as info:
        p.get(BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN]))
    assert str(info.value) == (
        f"engine cache {cache} is a file, not a folder: remove or rename it, or point "
        "--trt-cache-dir / trt_cache_dir at a folder"
    )


def test_cache_dir_file_in_a_pytest_run_is_one_clear_failure(pytester, models):
    pytester.makefile(".cache", **{"trt": "a file where the cache folder should be"})
    pytester.makepyfile(
        test_x=textwrap.dedent(
            f"""
            import pytest
            from pytest_trt import BuildConfig
            @pytest.mark.trt(BuildConfig(name="cbr", onnx={str(models['conv_bn_relu'])!r}))
            def test_a(trt_engine):
                pass
            """
        )
    )
    result = pytester.runpytest_subprocess("--trt-cache-dir", "trt.cache", "--trt-engine-build", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*engine cache */trt.cache is a file, not a folder: remove or rename it*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*pytest_trt/engines/cache.py*")


def test_rebuild_replaces_a_healthy_entry_without_keeping_it_as_corrupt(tmp_path, models):
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    cache = tmp_path / "cache"
    for _ in range(3):
        p = EngineProvider("tensorrt-rtx", cache_dir=cache, build=True, rebuild=True)
        assert not p.get(cfg).cached
        assert p.flush() == []
    assert not (cache / "corrupt").exists()
    assert [p.name for p in (cache / "tmp").iterdir()] == []
    assert EngineProvider("tensorrt-rtx", cache_dir=cache).get(cfg).cached


def test_corrupt_entries_are_pruned_to_the_newest_few(tmp_path, models):
    from pytest_trt.engines.cache import KEEP_CORRUPT

    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    cache = tmp_path / "cache"
    for _ in range(KEEP_CORRUPT + 3):
        p = EngineProvider("tensorrt-rtx", cache_dir=cache, build=True)
        engine = p.get(cfg)
        assert p.flush() == []
        (engine.artifact_dir / "entry.json").write_text("{", encoding="utf-8")
    assert len(list((cache / "corrupt").iterdir())) == KEEP_CORRUPT == 5


def test_stale_temp_folders_of_dead_writers_are_removed(tmp_path, models):
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    cache = tmp_path / "cache"
    stale = cache / "tmp" / f"{'a' * 64}.{dead_pid}.deadbeef"
    live = cache / "tmp" / f"{'b' * 64}.1.cafecafe"  # pid 1 is alive
    for folder in (stale, live):
        folder.mkdir(parents=True)
        (folder / "engine.plan").write_bytes(b"x" * 1000)
    p = EngineProvider("tensorrt-rtx", cache_dir=cache, build=True)
    p.get(BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN]))
    p.flush()
    assert not stale.exists() and live.exists()


def test_corrupt_entry_without_build_says_how_to_rebuild(tmp_path, models):
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    p = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "c", build=True)
    engine = p.get(cfg)
    p.flush()
    (engine.artifact_dir / "entry.json").write_text("{", encoding="utf-8")
    with pytest.raises(EngineNotBuilt, match=r"is corrupt \(.*\); run pytest with --trt-engine-build to rebuild it$"):
        EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "c").get(cfg)
