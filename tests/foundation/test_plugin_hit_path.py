"""The cache-hit session's path kept cheap (issue #14: a suite from cache <= 1.15x the same suite without pytest-trt).

The cost itself is measured by ``benchmarks/bench_suite.py``; these tests pin the behaviour each saving
relies on, and that what it skips is still correct: a build.json read without its log index still yields
the whole log, a tampered engine is still refused, the memoised distribution versions still change with
the environment, git still runs inside a repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.artifact import BUILD_FILE, ENGINE_FILE, BuildResult
from pytest_trt.audit import environment
from pytest_trt.common import filehash, logtext
from pytest_trt.engines.cache import EngineCache
from pytest_trt.errors import CacheCorrupt
from tests.conftest import needs_rtx

DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))


# -- build.json's log index is parsed only when the log is used ------------------------------------------------
@pytest.fixture(scope="module")
def entry(models, tmp_path_factory):
    """(cache, key, the engine as built): one real TensorRT-RTX build of the example conv-bn-relu model."""
    from pytest_trt.engines.provider import EngineProvider

    cache_dir = tmp_path_factory.mktemp("hit") / "cache"
    provider = EngineProvider("tensorrt-rtx", cache_dir=cache_dir, build=True)
    config = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    engine = provider.get(config)
    provider.flush()
    return EngineCache(cache_dir), provider.key_for(config), engine


@needs_rtx
def test_a_hit_keeps_the_log_index_as_text_and_the_log_reads_back_whole(entry):
    cache, key, engine = entry
    built = engine.result
    loaded = cache.load(key)
    assert loaded is not None
    lazy = loaded.__dict__["_lazy_log"]
    assert isinstance(lazy[2], str) and "log" not in loaded.__dict__  # not parsed by the load
    assert len(built.log) > 100  # a VERBOSE build log: the index is most of build.json
    assert loaded.build_json()["log_index"] == [[e.severity, e.time, e.text.count("\n") + 1] for e in built.log]
    assert loaded.log == built.log
    assert loaded == built


@needs_rtx
def test_build_json_read_without_its_index_equals_the_whole_parse(entry):
    cache, key, _engine = entry
    text = (cache.entry_dir(key) / BUILD_FILE).read_text(encoding="utf-8")
    split = logtext.without_log_index(text)
    assert split is not None
    build, index = split
    whole = json.loads(text)
    assert json.loads(index) == whole.pop("log_index")
    assert build == {**whole, "log_index": None}


@pytest.mark.parametrize("text", [
    '{"extra":{"log_index":[[1]]},"log_index":[["INFO",0.0,1]],"schema":1}',  # the key twice: not guessed
    '{"log_index": [["INFO", 0.0, 1]], "schema": 1}',  # indented (an older writer): not the compact form
    '{"schema":1}',  # no index at all
    '{"log_index":[["INFO",0.0,1],"schema":1}',  # cut short
])
def test_build_json_not_in_the_compact_form_is_parsed_whole(text):
    assert logtext.without_log_index(text) is None


def test_an_empty_log_index_is_split_too():
    build, index = logtext.without_log_index('{"a":[[1]],"log_index":[],"z":[[2]]}') or ({}, "")
    assert build == {"a": [[1]], "log_index": None, "z": [[2]]} and json.loads(index) == []


@needs_rtx
def test_a_bad_index_kept_as_text_fails_when_the_log_is_used(entry, tmp_path):
    cache, key, engine = entry
    built = engine.result
    folder = tmp_path / "entry"
    files = built.write(folder)
    text = (folder / BUILD_FILE).read_text(encoding="utf-8").replace('"log_index":[[', '"log_index":[[0],[', 1)
    (folder / BUILD_FILE).write_text(text, encoding="utf-8")
    import hashlib

    files[BUILD_FILE] = hashlib.sha256(text.encode()).hexdigest()  # as if written so: only the index is wrong
    result = BuildResult.read(folder, digests=files)
    with pytest.raises(ValueError, match="log_index"):
        result.log  # noqa: B018


# -- the engine hash check on a hit, inline or on a thread -------------------------------------------------------
@needs_rtx
@pytest.mark.parametrize("threaded", [False, True], ids=["inline", "thread"])
def test_a_tampered_engine_is_refused_on_a_hit(entry, tmp_path, monkeypatch, threaded):
    import shutil

    cache, key, _engine = entry
    copy = EngineCache(tmp_path / "cache")
    shutil.copytree(cache.entry_dir(key), copy.entry_dir(key))
    started: list[str] = []
    real_on_thread = filehash.on_thread

    def spy(name, *steps, **kwargs):
        started.append(name)
        return real_on_thread(name, *steps, **kwargs)

    monkeypatch.setattr(filehash, "on_thread", spy)
    monkeypatch.setattr(filehash, "HASH_THREAD_BYTES", 0 if threaded else 1 << 40)
    assert copy.load(key) is not None
    assert started == (["engine-sha256", "log-sha256"] if threaded else [])  # each file past the threshold
    plan = copy.entry_dir(key) / ENGINE_FILE
    data = bytearray(plan.read_bytes())
    data[len(data) // 2] ^= 0xFF
    plan.write_bytes(bytes(data))
    with pytest.raises(CacheCorrupt, match="engine.plan does not match its sha256"):
        copy.load(key)


def test_a_small_engine_is_hashed_without_a_thread():
    assert 1 << 20 < filehash.HASH_THREAD_BYTES  # the example engines (0.5 MB) are hashed inline


# -- installed distributions: memoised by a fingerprint of sys.path -------------------------------------------
def _dist(folder: Path, name: str, version: str) -> Path:
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n", encoding="utf-8")
    return info


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.setattr(sys, "path", [str(folder), *sys.path])
    return folder


def test_the_memo_answers_without_reading_any_metadata(site, tmp_path, monkeypatch):
    _dist(site, "made_up_pkg", "1.0")
    memo = tmp_path / "memo.json"
    first = environment.installed_versions(memo=memo)
    assert first == environment.installed_versions()  # the same answer as without a memo
    assert first["made-up-pkg"] == "1.0"
    assert json.loads(memo.read_text())["versions"] == first

    def never(dist):
        raise AssertionError(f"read {dist} although the memo is current")

    monkeypatch.setattr(environment, "_name_and_version", never)
    assert environment.installed_versions(memo=memo) == first


@pytest.mark.parametrize("change", ["install", "remove", "upgrade", "another sys.path"])
def test_a_changed_environment_is_read_again(site, tmp_path, monkeypatch, change):
    info = _dist(site, "made_up_pkg", "1.0")
    memo = tmp_path / "memo.json"
    assert environment.installed_versions(memo=memo)["made-up-pkg"] == "1.0"
    if change == "install":
        _dist(site, "other_pkg", "0.3")
    elif change == "remove":
        import shutil

        shutil.rmtree(info)
    elif change == "upgrade":
        import shutil

        shutil.rmtree(info)
        _dist(site, "made_up_pkg", "2.0")
    else:
        _dist(tmp_path / "first", "made_up_pkg", "3.0")
        monkeypatch.setattr(sys, "path", [str(tmp_path / "first"), *sys.path])
    expected = {"install": ("other-pkg", "0.3"), "remove": ("made-up-pkg", None), "upgrade": ("made-up-pkg", "2.0"),
                "another sys.path": ("made-up-pkg", "3.0")}[change]
    got = environment.installed_versions(memo=memo)
    assert got.get(expected[0]) == expected[1]
    assert got == environment.installed_versions()


def test_an_egg_info_rewritten_in_place_is_read_again(site, tmp_path):
    """setuptools' development install: ``<name>.egg-info`` holds no version in its name; its PKG-INFO is rewritten."""
    egg = site / "devpkg.egg-info"
    egg.mkdir()
    pkg_info = egg / "PKG-INFO"
    pkg_info.write_text("Metadata-Version: 2.1\nName: devpkg\nVersion: 0.1\n\n", encoding="utf-8")
    memo = tmp_path / "memo.json"
    assert environment.installed_versions(memo=memo)["devpkg"] == "0.1"
    before = pkg_info.stat()
    pkg_info.write_text("Metadata-Version: 2.1\nName: devpkg\nVersion: 0.10\n\n", encoding="utf-8")
    os.utime(pkg_info, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert environment.installed_versions(memo=memo)["devpkg"] == "0.10"


@pytest.mark.parametrize("content", ["not json", '{"schema": 1, "fingerprint": "x", "versions": {}}',
                                     '{"schema": 99}', "[]"])
def test_a_stale_or_damaged_memo_is_replaced(site, tmp_path, content):
    _dist(site, "made_up_pkg", "1.0")
    memo = tmp_path / "memo.json"
    memo.write_text(content)
    assert environment.installed_versions(memo=memo)["made-up-pkg"] == "1.0"
    assert json.loads(memo.read_text())["fingerprint"] == environment.distributions_fingerprint()


def test_no_memo_is_written_into_a_missing_folder(site, tmp_path):
    memo = tmp_path / "absent" / "memo.json"
    assert environment.installed_versions(memo=memo) == environment.installed_versions()
    assert not memo.parent.exists()


def test_capture_with_a_memo_equals_capture_without(tmp_path):
    memo = tmp_path / environment.MEMO_FILE
    plain = environment.capture_environment(backend="tensorrt-rtx", rootdir=tmp_path)
    assert environment.capture_environment(backend="tensorrt-rtx", rootdir=tmp_path, memo=memo) == plain
    assert memo.is_file()
    assert environment.capture_environment(backend="tensorrt-rtx", rootdir=tmp_path, memo=memo) == plain


def test_the_recorder_keeps_its_memo_beside_the_bundles(tmp_path):
    from pytest_trt.audit.recorder import AuditSettings, BundleRecorder

    (tmp_path / "bundles").mkdir()
    recorder = BundleRecorder(AuditSettings(bundle_dir=tmp_path / "bundles", rootdir=tmp_path), backend="tensorrt-rtx")
    assert recorder.environment["pip_freeze"] == environment.pip_freeze()
    memo = json.loads((tmp_path / "bundles" / environment.MEMO_FILE).read_text())
    assert memo["fingerprint"] == environment.distributions_fingerprint()


# -- git runs only where a repository can be ----------------------------------------------------------------------
@pytest.fixture
def started(monkeypatch):
    calls: list[tuple[str, ...]] = []
    real = environment._start

    def spy(*cmd: str):
        calls.append(cmd)
        return real(*cmd)

    monkeypatch.setattr(environment, "_start", spy)
    monkeypatch.delenv("GIT_DIR", raising=False)
    return calls


def test_no_git_process_outside_a_repository(tmp_path, started):
    assert not any((p / ".git").exists() for p in (tmp_path, *tmp_path.parents))  # the premise
    assert environment.git_state(tmp_path) == {"commit": None, "dirty": None}
    assert started == []


def _repo(folder: Path):
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    return git


def _commit(git) -> str:
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    return git("rev-parse", "HEAD").strip()


def test_one_git_process_in_a_subfolder_of_a_repository(tmp_path, started):
    git = _repo(tmp_path)
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    head = _commit(git)
    (tmp_path / "sub").mkdir()
    assert environment.git_state(tmp_path / "sub") == {"commit": head, "dirty": False}
    (tmp_path / "a.txt").write_text("2")
    assert environment.git_state(tmp_path / "sub") == {"commit": head, "dirty": True}
    git("add", "a.txt")  # staged only: still differs from the commit
    assert environment.git_state(tmp_path) == {"commit": head, "dirty": True}
    assert len(started) == 3  # one process per state


def test_a_repository_without_a_commit_has_none(tmp_path, started):
    _repo(tmp_path)
    assert environment.git_state(tmp_path) == {"commit": None, "dirty": None}
    assert len(started) == 1


def test_a_git_without_porcelain_v2_falls_back_to_the_plain_commands(tmp_path, started, monkeypatch):
    import shutil
    import stat

    real = shutil.which("git")
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "--porcelain=v2" ] && {{ echo "unknown option" >&2; exit 129; }}; '
                    f'done\nexec {real} "$@"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    project = tmp_path / "project"
    project.mkdir()
    git = _repo(project)
    (project / "a.txt").write_text("1")
    git("add", "a.txt")
    head = _commit(git)
    (project / "a.txt").write_text("2")
    assert environment.git_state(project) == {"commit": head, "dirty": True}
    assert [cmd[3] for cmd in started] == ["status", "rev-parse", "status"]


def test_git_dir_in_the_environment_lets_git_decide(tmp_path, started, monkeypatch):
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    assert environment.git_state(tmp_path) == {"commit": None, "dirty": None}
    assert started  # git asked, and it found nothing


# -- Engine: the record assertions load on first use ----------------------------------------------------------
def test_engine_methods_are_exactly_the_assertions():
    from pytest_trt.buildlog.registry import REGISTRY
    from pytest_trt.engines.assertions import EngineAssertions
    from pytest_trt.engines.engine import Engine

    assert {n for n in vars(EngineAssertions) if n.startswith("assert_")} == set(REGISTRY)
    for name in REGISTRY:
        assert getattr(Engine, name) is getattr(EngineAssertions, name)
        assert name in dir(Engine)
    with pytest.raises(AttributeError, match="has no attribute 'assert_nothing'"):
        Engine.__new__(Engine).assert_nothing  # noqa: B018


def test_an_engines_first_assertion_lookup_loads_them():
    code = ("import sys, pytest_trt.engines.engine as e\n"
            "engine = e.Engine.__new__(e.Engine)\n"
            "assert 'pytest_trt.buildlog.assertions' not in sys.modules\n"
            "assert engine.assert_fused.__func__ is e.Engine.assert_fused\n"
            "assert 'pytest_trt.buildlog.assertions' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_engine_loads_no_assertion_module():
    code = ("import sys, pytest_trt.engines.engine; "
            "print(sorted(m for m in sys.modules if m.endswith('assertions') and m.startswith('pytest_trt')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@needs_rtx
def test_an_engine_method_checks_the_record(entry):
    _, _, engine = entry
    engine.assert_layer_count(min=1)
    with pytest.raises(AssertionError, match=r"cbr"):
        engine.assert_layer_count(max=0)


# -- what a plain trt test run loads and attaches -------------------------------------------------------------
SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
@pytest.mark.parametrize("k", range(2))
def test_plain(trt_engine, k):
    assert trt_engine.result.backend == "tensorrt-rtx"
"""
CONFTEST = """
import json, sys

def pytest_runtest_logreport(report):
    if report.when == "call":
        with open("extras.txt", "a") as f:
            f.write(f"{{report.nodeid}} {{len(getattr(report, 'extras', []))}} {{len(report.user_properties)}}\\n")

def pytest_unconfigure(config):
    with open("loaded.json", "w") as f:
        json.dump(sorted(m for m in sys.modules if m.startswith("pytest_trt")), f)
"""


@needs_rtx
def test_a_hit_run_without_html_or_golden_loads_neither(pytester, models):
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (pip install 'pytest-trt[html]')")
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(CONFTEST.format())
    args = ("-p", "no:cacheprovider", "--trt-backend", "tensorrt-rtx")
    pytester.runpytest_subprocess(*args, "--trt-engine-build").assert_outcomes(passed=2)
    (pytester.path / "extras.txt").unlink()
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=2)
    lines = (pytester.path / "extras.txt").read_text().split("\n")[:-1]
    assert [line.split()[1:] for line in lines] == [["0", "5"]] * 2  # bundle properties, no html extras
    loaded = set(json.loads((pytester.path / "loaded.json").read_text()))
    assert {"pytest_trt.audit.recorder", "pytest_trt.engines.engine"} <= loaded  # positive control: bundles were audited
    for module in ("pytest_trt.pytest_plugin.golden", "pytest_trt.engines.assertions", "pytest_trt.buildlog.assertions"):
        assert module not in loaded
    assert not any((pytester.path / "trt-bundles").glob("*.invalid"))
    assert (pytester.path / "trt-bundles" / environment.MEMO_FILE).is_file()
    html = pytester.runpytest_subprocess(*args, "--html=report/index.html")
    html.assert_outcomes(passed=2)
    lines = (pytester.path / "extras.txt").read_text().split("\n")[:-1]
    assert [line.split()[1] for line in lines[-2:]] == ["2", "2"]  # with --html: the bundle link and the text


# -- the cache entry's digests, checked on load, name the result for its bundle without a second read -------------
@needs_rtx
def test_a_cached_engine_is_identified_by_the_digests_it_was_checked_against(entry, tmp_path):
    import hashlib
    import shutil

    from pytest_trt.audit.recorder import _result_identity
    from pytest_trt.engines.cache import ENTRY_FILE
    from pytest_trt.engines.engine import Engine

    cache, key, built = entry
    copy = EngineCache(tmp_path / "cache")
    shutil.copytree(cache.entry_dir(key), copy.entry_dir(key))
    files = json.loads((copy.entry_dir(key) / ENTRY_FILE).read_text())["files"]
    expected = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()  # independent: the digest
    result = copy.load(key)
    assert result is not None and result.verified_digests == files
    assert built.result.verified_digests is None  # a build was never checked against an entry
    engine = Engine(built.config, result, built.backend, artifact_dir=copy.entry_dir(key), cached=True)
    (copy.entry_dir(key) / ENTRY_FILE).unlink()  # read once, on load: the identity does not need it again
    assert _result_identity(engine) == expected
