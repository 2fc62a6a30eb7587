"""A calibration inside a build prints when it starts and ends; its seconds count in the engine's time and table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx  # noqa: F401 - imported before pytester snapshots sys.modules (a second import of its extension aborts)
import pytest

from pytest_trt.testing.models import write_classifier
from tests.conftest import needs_ort

pytestmark = needs_ort


def test_calibration_prints_its_start_and_end_and_counts_in_the_engine_time(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    write_classifier(pytester.path / "model.onnx", argmax=False)
    np.savez(pytester.path / "calib.npz", x=np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32))
    pytester.makepyfile(test_int8="""
        import pytest
        from pytest_trt import BuildConfig, Calibration

        INT8 = BuildConfig(name="model_int8", onnx="model.onnx", precision="int8",
                           calibration=Calibration(algorithm="minmax", data="calib.npz", batch_size=4))
        FP32 = BuildConfig(name="model_fp32", onnx="model.onnx")

        @pytest.mark.trt(INT8)
        def test_int8(trt_engine):
            pass

        @pytest.mark.trt(FP32)
        def test_fp32(trt_engine):
            pass
    """)
    cache = tmp_path / "cache"
    args = ("-p", "no:cacheprovider", "--trt-backend", "onnxruntime", "--trt-engine-build", f"--trt-cache-dir={cache}")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "pytest-trt: building engine 'model_int8' with onnxruntime *",
        "pytest-trt: calibrating 'model_int8': minmax over calib.npz ...",
        "pytest-trt: calibrated 'model_int8' in * s (8 samples, ranges from the calibrator)",
        "pytest-trt: built engine 'model_int8' in * s (calibration * s)",
    ])
    out = result.stdout.str()
    calibrated = float(re.search(r"calibrated 'model_int8' in ([\d.]+) s", out).group(1))  # type: ignore[union-attr]
    total, calibration = map(float, re.search(  # type: ignore[union-attr]
        r"built engine 'model_int8' in ([\d.]+) s \(calibration ([\d.]+) s\)", out).groups())
    # the cache entry's durations, as the build recorded them
    (build_json,) = [json.loads(p.read_text()) for p in cache.rglob("build.json")
                     if "calibration" in json.loads(p.read_text())["extra"]]
    durations = build_json["durations"]
    assert calibration == pytest.approx(durations["calibration"], abs=0.006)
    assert calibrated == pytest.approx(durations["calibration"], abs=0.006)
    assert total == pytest.approx(durations["build"] + durations["calibration"], abs=0.006)
    result.stdout.no_fnmatch_line("*built engine 'model_fp32' in * (calibration*")
    result.stdout.fnmatch_lines([
        "engine * config hash * status * build s * calibration s * layers * backend*",
        f"model_int8 v0 * built * {total:.2f} * {calibration:.2f} * onnxruntime *",
        "model_fp32 v0 * built * - * onnxruntime *",
    ])

    again = pytester.runpytest_subprocess(*args)  # the engine from the cache: nothing calibrates
    again.assert_outcomes(passed=2)
    again.stdout.no_fnmatch_line("*calibrating*")
