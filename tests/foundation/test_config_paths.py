"""Relative paths in configs under the rule of docs/options.md ("Relative paths"), in real pytest runs.

In a pytest session they resolve against the rootdir, wherever pytest runs from; in a script, against the
current directory.  A config whose ONNX file is missing at the module's import fails its own tests only.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx  # noqa: F401 - imported before pytester snapshots sys.modules (a second import of its extension aborts)
import pytest

from pytest_trt.testing.models import write_classifier
from tests.conftest import needs_ort

pytestmark = needs_ort

PROJECT_TEST = """
    from pathlib import Path

    import pytest
    from pytest_trt import BuildConfig, Calibration, GoldenDataset

    MODEL = BuildConfig(name="model", onnx="models/model.onnx")
    INT8 = BuildConfig(name="model_int8", onnx="models/model.onnx", precision="int8",
                       calibration=Calibration(algorithm="minmax", data="calib/*.npz", cache="calib/model.cache",
                                               batch_size=4))
    PINNED = BuildConfig.from_toml("pins.toml", "pinned")
    DATA = GoldenDataset.from_directory("golden_data")
    ROOT = Path({root!r})

    @pytest.mark.trt(MODEL)
    def test_model_and_dataset_come_from_the_rootdir(trt_engine):
        assert trt_engine.config.onnx.resolve() == ROOT / "models" / "model.onnx"
        assert DATA.inputs["x"].shape == (6, 8)
        assert trt_engine.run({{"x": DATA.inputs["x"]}})["logits"].shape == (6, 5)

    @pytest.mark.trt(INT8)
    def test_calibration_data_and_cache_come_from_the_rootdir(trt_engine):
        assert (ROOT / "calib" / "model.cache").is_file()
        assert not (Path.cwd() / "calib").exists()
        assert trt_engine.result.extra["calibration"]["samples"] == 8

    @pytest.mark.trt(PINNED)
    def test_toml_pins_file_comes_from_the_rootdir(trt_engine):
        assert trt_engine.config.onnx.resolve() == ROOT / "models" / "model.onnx"
"""


def _project(pytester: pytest.Pytester) -> Path:
    root = pytester.path
    (root / "models").mkdir()
    write_classifier(root / "models" / "model.onnx", argmax=False)
    (root / "golden_data").mkdir()
    np.save(root / "golden_data" / "x.npy", np.random.default_rng(1).standard_normal((6, 8)).astype(np.float32))
    (root / "calib").mkdir()
    np.savez(root / "calib" / "part.npz", x=np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32))
    (root / "pins.toml").write_text('[configs.pinned]\nonnx = "models/model.onnx"\n', encoding="utf-8")
    pytester.makeini("[pytest]\ntrt_backend = onnxruntime\n")
    (root / "tests").mkdir()
    return root


def test_relative_paths_resolve_against_the_rootdir_when_pytest_runs_in_a_subdirectory(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = _project(pytester)
    (root / "tests" / "test_model.py").write_text(textwrap.dedent(PROJECT_TEST.format(root=str(root.resolve()))))
    monkeypatch.chdir(root / "tests")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build",
                                           f"--trt-cache-dir={tmp_path / 'cache'}", "test_model.py")
    result.assert_outcomes(passed=3)


def test_a_missing_file_names_the_rootdir_rule(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(pytester)
    (root / "tests" / "test_missing.py").write_text(textwrap.dedent("""
        from pytest_trt import GoldenDataset

        def test_dataset():
            GoldenDataset.from_directory("no_such_data")
    """))
    monkeypatch.chdir(root / "tests")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_missing.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*'no_such_data' does not exist*relative paths resolve against the pytest rootdir "
                                 f"{root}, not the current directory {root / 'tests'}*"])


def test_a_config_with_a_missing_onnx_file_fails_its_tests_and_the_module_runs(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    _project(pytester)
    pytester.makepyfile(test_configs="""
        import pytest
        from pytest_trt import BuildConfig

        GOOD = BuildConfig(name="good", onnx="models/model.onnx")
        BAD = BuildConfig(name="bad", onnx="models/renamed.onnx")

        @pytest.mark.trt(GOOD)
        def test_good(trt_engine):
            assert trt_engine.config.name == "good"

        @pytest.mark.trt(BAD)
        def test_bad_engine(trt_engine):
            pass

        def test_bad_by_factory(trt_build):
            trt_build(BAD)

        def test_plain():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build",
                                           f"--trt-cache-dir={tmp_path / 'cache'}", "-rfE")
    result.assert_outcomes(passed=2, errors=1, failed=1)
    result.stdout.fnmatch_lines([
        "FAILED test_configs.py::test_bad_by_factory - Failed: BuildConfig 'bad'*",
        "ERROR test_configs.py::test_bad_engine - Failed: BuildConfig 'bad'*",
    ])
    result.stdout.fnmatch_lines(["BuildConfig 'bad': ONNX file 'models/renamed.onnx' does not exist; relative paths "
                                 "resolve against the pytest rootdir *"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_outside_pytest_relative_paths_resolve_against_the_current_directory(tmp_path: Path) -> None:
    write_classifier(tmp_path / "model.onnx")
    script = textwrap.dedent("""
        from pytest_trt import BuildConfig, ConfigError

        print(BuildConfig(name="m", onnx="model.onnx").onnx)
        try:
            BuildConfig(name="m", onnx="models/model.onnx")
        except ConfigError as exc:
            print(exc.message)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "model.onnx"
    assert lines[1] == (f"BuildConfig 'm': ONNX file 'models/model.onnx' does not exist; relative paths resolve "
                        f"against the current directory {Path(tmp_path).resolve()} (in a pytest session: against "
                        "the rootdir; docs/options.md, 'Relative paths')")
