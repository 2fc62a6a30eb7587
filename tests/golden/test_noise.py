"""Measured noise: a real ONNX Runtime engine (optimizations on) against its unoptimized reference, written into
the golden at approval, shown beside the thresholds of a failure, and taken as thresholds by tolerance="measured"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import onnxruntime as ort
import pytest
from golden_engines import real_engine

from pytest_trt.cli import main
from pytest_trt.config import BuildConfig
from pytest_trt.errors import GoldenError
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import GoldenCheck, GoldenRegression, UpdateResult
from tests.ort_models import conv_bn_relu

MakeGolden = Callable[..., GoldenCheck]


@pytest.fixture
def inputs() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((48, 3, 8, 8)).astype(np.float32)


def _config(tmp_path: Path, scale: float = 1.0) -> BuildConfig:
    return BuildConfig(name="cbr", onnx=conv_bn_relu(tmp_path / f"cbr-{scale}.onnx", scale=scale))


def _independent(model: Path, x: np.ndarray) -> tuple[float, float]:
    """L2 delta and max abs of ONNX Runtime 'all' against 'disabled', from two sessions made here."""
    outs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        outs.append(ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0])
    o, r = (a.astype(np.float64) for a in outs)
    return float(np.linalg.norm(o - r) / np.linalg.norm(r)), float(np.abs(o - r).max())


def _approve(golden: MakeGolden, engine: object, x: np.ndarray) -> UpdateResult:
    result = golden(update=True, approve="first, CR-9").check(engine, dataset=GoldenDataset.from_arrays({"x": x}))
    assert isinstance(result, UpdateResult)
    return result


def _noise(path: Path) -> dict:
    with h5py.File(path, "r") as f:
        return json.loads(f["snapshots/cbr"].attrs["noise"])


def test_the_approval_writes_the_engine_noise_against_its_reference(
    golden: MakeGolden, golden_dir: Path, tmp_path: Path, inputs: np.ndarray, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    l2, max_abs = _independent(config.onnx, inputs)
    assert 0 < l2 < 1e-5 and max_abs > 0  # the folding is visible, and small
    summary = _approve(golden, real_engine(config), inputs).summary_lines()
    noise = _noise(golden_dir / "cbr.h5")
    assert summary[-1].startswith("cbr.h5 [cbr] generation 1: noise: features L2 ")
    assert noise["measured"] and noise["comparisons"] == ["engine vs reference"]
    got = noise["outputs"]["features"]
    assert got["l2_delta"] == pytest.approx(l2, rel=0.25) and got["max_abs"] == pytest.approx(max_abs, rel=0.5)
    assert got["classifier"] is False and got["samples"] == 48
    suggested = noise["suggested"]["features"]
    assert suggested["l2_delta"] == pytest.approx(max(3 * got["l2_delta"], 1e-6)) and "top1_agreement" not in suggested
    assert main(["golden", "show", str(golden_dir / "cbr.h5")]) == 0
    out = capsys.readouterr().out
    assert f"noise: features L2 {got['l2_delta']:.3g} max abs {got['max_abs']:.3g}" in out


def test_outputs_given_record_why_noise_was_not_measured(
    golden: MakeGolden, golden_dir: Path, tmp_path: Path, inputs: np.ndarray
) -> None:
    config = _config(tmp_path)
    outputs = {"features": real_engine(config).run({"x": inputs})["features"]}  # type: ignore[attr-defined]
    golden(update=True, approve="outputs", config_provider=lambda: config).check(
        outputs, dataset=GoldenDataset.from_arrays({"x": inputs}))
    assert _noise(golden_dir / "cbr.h5") == {"measured": False, "reason": "outputs were given, not an engine"}
    with pytest.raises(GoldenError) as info:
        golden(config_provider=lambda: config).check(outputs, tolerance="measured")
    assert 'check(tolerance="measured") needs the noise measured at approval' in str(info.value)
    assert "pytest-trt golden tolerance" in str(info.value) and "outputs were given" in str(info.value)


def test_a_failure_shows_the_measured_noise_beside_the_threshold(
    golden: MakeGolden, golden_dir: Path, tmp_path: Path, inputs: np.ndarray
) -> None:
    _approve(golden, real_engine(_config(tmp_path)), inputs)
    shown = f"{_noise(golden_dir / 'cbr.h5')['outputs']['features']['l2_delta']:.3g}"
    with pytest.raises(GoldenRegression) as info:
        golden().check(real_engine(_config(tmp_path, scale=1.2)), l2_delta=0.05)
    lines = str(info.value).splitlines()
    assert any(line.startswith("[REGRESSION] features: Output L2 norm delta: ")
               and line.endswith(f"> threshold(0.05), measured noise {shown}") for line in lines), lines


def test_tolerance_measured_passes_the_approved_engine_and_fails_a_scaled_model(
    golden: MakeGolden, golden_dir: Path, tmp_path: Path, inputs: np.ndarray
) -> None:
    _approve(golden, real_engine(_config(tmp_path)), inputs)
    result = golden().check(real_engine(_config(tmp_path)), tolerance="measured")
    checks = {c.metric: c for c in result.verdict.checks}
    noise = _noise(golden_dir / "cbr.h5")["outputs"]["features"]
    assert checks["l2_delta"].threshold == pytest.approx(max(3 * noise["l2_delta"], 1e-6))
    assert checks["max_abs"].threshold == pytest.approx(max(3 * noise["max_abs"], 1e-6))
    with pytest.raises(GoldenRegression) as info:
        golden().check(real_engine(_config(tmp_path, scale=1.0003)), tolerance="measured")  # far below 0.05
    assert "[REGRESSION] features: Output L2 norm delta:" in str(info.value)
    # an explicit threshold still wins over the measured one
    golden().check(real_engine(_config(tmp_path, scale=1.0003)), tolerance="measured", l2_delta=0.05, max_abs=1.0,
                   max_rel=None, cosine=None)
    with pytest.raises(GoldenError, match="tolerance='guessed'"):
        golden().check(real_engine(_config(tmp_path)), tolerance="guessed")


NOISE_TEST = '''
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset

CBR = BuildConfig(name="cbr", onnx="models/cbr.onnx")
DATA = GoldenDataset.from_arrays({"x": np.random.default_rng(3).standard_normal((8, 3, 8, 8)).astype(np.float32)})

@pytest.mark.trt(CBR)
def test_cbr(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATA)
'''


@pytest.mark.parametrize("ini, measured", [("", True), ("trt_golden_measure_noise = false\n", False)])
def test_the_ini_key_turns_the_approval_measurement_off(pytester: pytest.Pytester, ini: str, measured: bool) -> None:
    (pytester.path / "models").mkdir()
    conv_bn_relu(pytester.path / "models" / "cbr.onnx")
    pytester.makeini("[pytest]\n" + ini)
    pytester.makepyfile(test_cbr=NOISE_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-backend", "onnxruntime",
                                           "--trt-engine-build", "--trt-update-golden", "--trt-approve", "first")
    result.assert_outcomes(passed=1)
    with h5py.File(pytester.path / "golden" / "cbr.h5", "r") as f:
        noise = json.loads(f["snapshots/cbr"].attrs["noise"])
    if measured:
        assert noise["measured"] is True and noise["outputs"]["features"]["samples"] == 8
    else:
        assert noise == {"measured": False, "reason": "ini trt_golden_measure_noise = false"}
