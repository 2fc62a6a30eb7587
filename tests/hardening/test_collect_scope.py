"""pytest does not walk the plugin's evidence folders (the engine cache and the bundle folder) for tests: they hold
a file per build for years.  Each folder here holds a test file that fails, so a session that collected it would
say so; a path given to pytest is still collected, and so is the rootdir."""

from __future__ import annotations

import pytest

TRAP = "def test_trap():\n    assert False, 'collected from an evidence folder'\n"


def _project(pytester: pytest.Pytester, *folders: str) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    for folder in folders:
        path = pytester.path / folder
        path.mkdir(parents=True)
        (path / _trap(folder)).write_text(TRAP)
        for i in range(3):  # what a bundle folder holds
            (path / f"m{i}-v1.0.0-rtx1.7-cpu-aot.tar.gz").write_bytes(b"\x1f\x8b")
            (path / f".m{i}-v1.0.0-rtx1.7-cpu-aot.tar.gz.state.json").write_text("{}")


def _trap(folder: str) -> str:
    """A test file name of its own per folder (two of one name would clash on import)."""
    return f"test_trap_{folder.strip('.').replace('/', '_').replace('-', '_')}.py"


def test_the_default_bundle_and_cache_folders_are_not_collected(pytester: pytest.Pytester) -> None:
    _project(pytester, "trt-bundles", ".trt_cache", "golden")
    result = pytester.runpytest_subprocess("--collect-only", "-q")
    # the golden folder holds a few files per model: it is walked
    assert _collected(result) == {"test_a.py::test_a", "golden/test_trap_golden.py::test_trap"}
    # without the plugin pytest walks the bundle folder (the cache's leading dot keeps it out anyway)
    bare = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:trt")
    assert _collected(bare) == {"test_a.py::test_a", "golden/test_trap_golden.py::test_trap",
                                "trt-bundles/test_trap_trt_bundles.py::test_trap"}


def _collected(result: pytest.RunResult) -> set[str]:
    return {line for line in result.stdout.lines if "::" in line}


def test_folders_named_by_options_and_the_ini_are_not_collected(pytester: pytest.Pytester) -> None:
    _project(pytester, "evidence/bundles", "engines", "trt-bundles")
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\ntrt_cache_dir = engines\n")
    result = pytester.runpytest_subprocess("--trt-bundle-dir=evidence/bundles", "-q")
    result.stdout.fnmatch_lines(["*1 failed, 1 passed*"])  # trt-bundles is not the bundle folder in this run
    result.stdout.fnmatch_lines(["FAILED trt-bundles/test_trap_trt_bundles.py::test_trap*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize("args", [["--trt-bundle-dir=."], ["--trt-bundle-dir=.."],
                                  ["trt-bundles/test_trap_trt_bundles.py"], ["trt-bundles"]])
def test_a_folder_holding_the_rootdir_or_a_given_path_is_still_collected(pytester: pytest.Pytester, args) -> None:
    _project(pytester, "trt-bundles")
    result = pytester.runpytest_subprocess("--collect-only", "-q", *args)
    assert "trt-bundles/test_trap_trt_bundles.py::test_trap" in _collected(result)
