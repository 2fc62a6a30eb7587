"""Suggested commands paste from where pytest ran; a path option that moved the rootdir is reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_trt.pytest_plugin.invocation import pasteable_nodeid, rootdir_moved_by


def test_pasteable_nodeid_is_relative_to_the_invocation_dir(tmp_path: Path) -> None:
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    nodeid = "tests/sub/test_m.py::test_a[x-y]"
    assert pasteable_nodeid(nodeid, rootpath=tmp_path, invocation_dir=tmp_path) == nodeid
    assert pasteable_nodeid(nodeid, rootpath=tmp_path, invocation_dir=tmp_path / "tests") == "sub/test_m.py::test_a[x-y]"
    assert pasteable_nodeid(nodeid, rootpath=tmp_path, invocation_dir=tmp_path / "tests" / "sub") == (
        "test_m.py::test_a[x-y]"
    )


def test_only_space_separated_existing_paths_without_ini_are_reported(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    opts = ("--trt-cache-dir",)
    assert rootdir_moved_by(["--trt-cache-dir", "c", "tests"], path_options=opts, inipath=None,
                            invocation_dir=tmp_path) == ["--trt-cache-dir c"]
    assert rootdir_moved_by(["--trt-cache-dir=c"], path_options=opts, inipath=None, invocation_dir=tmp_path) == []
    assert rootdir_moved_by(["--trt-cache-dir", "new"], path_options=opts, inipath=None, invocation_dir=tmp_path) == []
    assert rootdir_moved_by(["--trt-cache-dir", "c"], path_options=opts, inipath=tmp_path / "pytest.ini",
                            invocation_dir=tmp_path) == []


def test_space_separated_cache_dir_that_moves_the_rootdir_is_warned(pytester: pytest.Pytester) -> None:
    outside = pytester.path.parent / f"{pytester.path.name}-cache"
    outside.mkdir()
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("test_a.py", "--trt-cache-dir", str(outside), "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([
        f"rootdir: {pytester.path.parent}",
        f"*PytestConfigWarning: pytest-trt: --trt-cache-dir {outside} took part in choosing pytest's rootdir "
        f"({pytester.path.parent})*Write --trt-cache-dir={outside}, or add a pytest.ini*",
    ])
    fixed = pytester.runpytest_subprocess("test_a.py", f"--trt-cache-dir={outside}", "-p", "no:cacheprovider")
    fixed.stdout.fnmatch_lines([f"rootdir: {pytester.path}"])
    fixed.stdout.no_fnmatch_line("*took part in choosing*")


def test_missing_golden_command_pastes_from_a_subfolder(
    pytester: pytest.Pytester, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\n")
    sub = pytester.mkpydir("tests")
    (sub / "test_m.py").write_text(textwrap.dedent(
        f"""
        import numpy as np
        import pytest
        from pytest_trt import BuildConfig, Profile
        from pytest_trt.golden.dataset import GoldenDataset
        CFG = BuildConfig(name="cbr", onnx={str(models['conv_bn_relu'])!r},
                          profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16)))])

        @pytest.mark.trt(CFG)
        def test_golden(trt_golden, trt_engine):
            trt_golden.check(trt_engine)
        """
    ), encoding="utf-8")
    monkeypatch.chdir(sub)
    result = pytester.runpytest_subprocess("-p", "pytest_trt.testing.register_fake", "--trt-backend", "fake",
                                           "--trt-engine-build", "-p", "no:cacheprovider")  # plumbing: the fake backend
    result.stdout.fnmatch_lines(["*no golden for 'cbr'*", "  pytest test_m.py::test_golden --trt-backend fake *"])
    result.stdout.no_fnmatch_line("  pytest tests/test_m.py::test_golden*")
