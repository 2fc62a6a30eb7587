"""Per-tensor INT8 error and the sensitivity search, on real ONNX Runtime Q/DQ models (TensorRT-RTX builds too).

The planted model: ``x (N, 8) -> fc1 -> h -> amp (Div) -> t -> fc2 -> h2 -> fc3 -> logits``.  Channel 0 of ``h`` is
feature 7 alone, which is 0 in the golden data and 4 in one calibration sample (inside the normal features' range);
``amp`` multiplies channel 0 by 500 and ``fc2`` ignores it.  So min-max calibration gives ``t`` a range of 2000
while its real values stay within a few units: they round to 0 and accuracy collapses.  ``amp`` is not an op the
quantizer handles, so the one node to leave in float is ``fc2`` (the reader of ``t``, which quantizes it); the
test finds the smallest such sets independently, with ONNX Runtime's own ``quantize_static`` over every set of one
or two nodes, and the SQNR of ``t`` with numpy.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

# imported here, before any in-process pytester run of this folder restores sys.modules: a golden module first
# imported inside one would come back as a second copy (isinstance of its results fails)
import pytest_trt.golden.updating  # noqa: E402, F401
import pytest_trt.golden.verifying  # noqa: E402, F401
import pytest_trt.golden.workflow  # noqa: E402, F401
from pytest_trt.config import BuildConfig, Calibration  # noqa: E402
from pytest_trt.errors import ConfigError  # noqa: E402

FEATURES, HIDDEN, CLASSES = 8, 16, 4
NODES = ("fc1", "amp", "fc2", "fc3")
GAIN = 500.0
LIMITS = ["top1_drop=0.02", "l2_delta=none", "drift_sd=none"]


def _weights(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((FEATURES, HIDDEN)).astype(np.float32) / 2
    w1[7, :] = 0.0
    w1[:, 0] = 0.0
    w1[7, 0] = 1.0  # channel 0 of h: feature 7 only
    w2 = rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) / 3
    w2[0, :] = 0.0  # fc2 ignores channel 0
    w3 = rng.standard_normal((HIDDEN, CLASSES)).astype(np.float32) / 3
    return w1, w2, w3


def write_model(path: Path, *, seed: int = 0, planted: bool = True) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    w1, w2, w3 = _weights(seed)
    if not planted:
        w1[7, 0] = 0.0
    divisor = np.ones(HIDDEN, np.float32)
    divisor[0] = 1.0 / GAIN
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Div", ["h", "divisor"], ["t"], name="amp"),
             helper.make_node("MatMul", ["t", "w2"], ["h2"], name="fc2"),
             helper.make_node("MatMul", ["h2", "w3"], ["logits"], name="fc3")]
    graph = helper.make_graph(
        nodes, "planted", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", CLASSES])],
        [numpy_helper.from_array(w, n) for w, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"), (divisor, "divisor"))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def golden_inputs(n: int = 400, seed: int = 1) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, FEATURES)).astype(np.float32)
    x[:, 7] = 0.0
    return x


def calibration_inputs(n: int = 32, seed: int = 2, outlier: float = 4.0) -> np.ndarray:
    x = golden_inputs(n, seed)
    x[5, 7] = outlier
    return x


def float_run(model: Path, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"x": x})[0])


@dataclasses.dataclass
class Planted:
    folder: Path
    model: Path
    pins: Path
    golden: Path
    config: BuildConfig
    labels: np.ndarray


def make_planted(folder: Path, *, planted: bool = True, name: str = "planted") -> Planted:
    """Model, calibration set, pins file and a golden approved from the float model's outputs (labels = its argmax)."""
    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

    folder.mkdir(parents=True, exist_ok=True)
    model = write_model(folder / f"{name}.onnx", planted=planted)
    np.savez(folder / "calib.npz", x=calibration_inputs())
    pins = folder / "pins.toml"
    pins.write_text(f'[configs.{name}]\nonnx = "{model.name}"\nprecision = "int8"\n'
                    f'profiles = {{x = [[1, {FEATURES}], [64, {FEATURES}], [512, {FEATURES}]]}}\n\n'
                    f'[configs.{name}.calibration]\nalgorithm = "minmax"\ndata = "calib.npz"\nbatch_size = 8\n')
    config = BuildConfig.from_toml(pins, name)
    x = golden_inputs()
    logits = float_run(model, x)
    labels = logits.argmax(1)
    settings = GoldenSettings(golden_dir=folder / "golden", update=True, approve="float reference",
                              rootdir=folder)
    GoldenCheck(settings, config_provider=lambda: config).check(
        {"logits": logits}, dataset=GoldenDataset.from_arrays({"x": x}, labels=labels), classifier=["logits"])
    return Planted(folder, model, pins, folder / "golden" / f"{name}.h5", config, labels)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return make_planted(tmp_path_factory.mktemp("planted"))


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


# -- the independent computations -------------------------------------------------------------------------------

class _Reader:
    def __init__(self, x: np.ndarray) -> None:
        self.items = iter([{"x": x[i:i + 8]} for i in range(0, len(x), 8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def ort_quantized_accuracy(model: Path, exclude: list[str], out: Path, x: np.ndarray, labels: np.ndarray) -> float:
    """Accuracy of ONNX Runtime's own quantize_static (MinMax, symmetric QDQ) with ``exclude`` left in float."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    quantize_static(str(model), str(out), _Reader(calibration_inputs()), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, nodes_to_exclude=exclude,
                    calibrate_method=CalibrationMethod.MinMax,
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    return float((float_run(out, x).argmax(1) == labels).mean())


def numpy_sqnr_of_t(x: np.ndarray) -> float:
    """SQNR (dB) of ``t`` against its INT8 rounding, simulated in numpy as the Q/DQ model computes it: ``x`` and
    ``w1`` rounded first, every scale the symmetric min-max of the calibration set (float model) / 127."""
    w1 = _weights(0)[0].astype(np.float64)
    cal = calibration_inputs().astype(np.float64)
    gain = np.ones(HIDDEN)
    gain[0] = GAIN

    def fq(v: np.ndarray, amax: float) -> np.ndarray:
        scale = float(np.float32(amax) / np.float32(127.0))
        return np.clip(np.round(v / scale), -128, 127) * scale

    t = (fq(x.astype(np.float64), np.abs(cal).max()) @ fq(w1, np.abs(w1).max())) * gain
    q = fq(t, np.abs((cal @ w1) * gain).max())
    return float(10 * np.log10(np.sum(t * t) / np.sum((t - q) ** 2)))


@pytest.fixture(scope="module")
def expected_nodes(planted: Planted, tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    """The smallest node sets whose exclusion recovers top-1 to within 2 points (ORT's quantize_static, brute force
    over every set of one or two nodes)."""
    import itertools

    tmp = tmp_path_factory.mktemp("independent")
    x = golden_inputs()
    base = ort_quantized_accuracy(planted.model, [], tmp / "none.onnx", x, planted.labels)
    assert base < 0.9  # the plant works: min-max INT8 breaks the model
    for size in (1, 2):
        hits = [sorted(c) for c in itertools.combinations(NODES, size)
                if ort_quantized_accuracy(planted.model, list(c), tmp / f"{'-'.join(c)}.onnx", x,
                                          planted.labels) >= 0.98]
        if hits:
            return hits
    return []


# -- item 1: per-tensor error -----------------------------------------------------------------------------------

def test_errors_rank_the_planted_tensor_first_with_numpys_sqnr(planted: Planted) -> None:
    from pytest_trt.calibration.explicit import calibrate_explicit
    from pytest_trt.sensitivity.tensor_errors import batches_of, measure

    x = golden_inputs()
    errors = measure(planted.model, calibrate_explicit(planted.config).qdq_model, batches_of({"x": x}, len(x), 64))
    worst = errors.tensors[0]
    assert (worst.tensor, worst.kind, worst.producer, worst.consumers) == ("t", "activation", "amp", ("fc2",))
    assert worst.sqnr_db == pytest.approx(numpy_sqnr_of_t(x), abs=0.05)
    assert errors.ranked_nodes()[0][0] == "fc2"  # the reader of t; its writer, amp, is not quantized
    assert "amp" not in dict(errors.ranked_nodes())
    # batching does not change the sums: one batch of 400 and 50 batches of 8 agree
    again = measure(planted.model, calibrate_explicit(planted.config).qdq_model, batches_of({"x": x}, len(x), 8))
    assert again.batches == 50 and again.samples == 400
    assert [(t.tensor, round(t.sqnr_db, 6)) for t in again.tensors] == [(t.tensor, round(t.sqnr_db, 6))
                                                                         for t in errors.tensors]


def test_weight_errors_match_numpy_dequantization(planted: Planted) -> None:
    from pytest_trt.calibration.explicit import calibrate_explicit
    from pytest_trt.sensitivity.tensor_errors import batches_of, measure

    x = golden_inputs(16)
    errors = measure(planted.model, calibrate_explicit(planted.config).qdq_model, batches_of({"x": x}, 16, 16))
    weights = {t.tensor: t for t in errors.tensors if t.kind == "weight"}
    assert sorted(weights) == ["w1", "w2", "w3"]
    for name, w in zip(("w1", "w2", "w3"), _weights(0), strict=True):
        w64 = w.astype(np.float64)
        scale = np.float32(np.abs(w).max()) / np.float32(127.0)  # symmetric per-tensor
        q = np.clip(np.round(w64 / scale), -127, 127) * scale
        expected = 10 * math.log10(np.sum(w64 * w64) / np.sum((w64 - q) ** 2))
        assert weights[name].sqnr_db == pytest.approx(expected, abs=0.01), name
        assert weights[name].consumers == (f"fc{name[1]}",)
        assert weights[name].clipped == 0.0


def test_errors_cli_json_names_nodes(planted: Planted) -> None:
    proc = cli("calib", "errors", str(planted.pins), "planted", "--golden", str(planted.golden), "--json",
               "--batch", "32")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["samples"] == 400 and doc["batches"] == 13
    assert doc["tensors"][0]["tensor"] == "t" and doc["nodes"][0]["node"] == "fc2"
    text = cli("calib", "errors", str(planted.pins), "planted", "--golden", str(planted.golden))
    assert text.returncode == 0 and "t  (amp -> fc2)" in text.stdout


def test_errors_cli_refuses_a_missing_golden_in_one_line(planted: Planted, tmp_path: Path) -> None:
    proc = cli("calib", "errors", str(planted.pins), "planted", "--golden", str(tmp_path / "nope.h5"))
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "nope.h5: no such golden file" in proc.stderr
    proc = cli("calib", "errors", str(planted.pins), "other", "--golden", str(planted.golden))
    assert proc.returncode == 3 and "config 'other' is not in" in proc.stderr and "Traceback" not in proc.stderr


# -- item 2: exclude_nodes and the search -----------------------------------------------------------------------

def test_exclude_nodes_is_pinned_sorted_and_hashed(planted: Planted) -> None:
    calib = planted.config.calibration
    assert calib is not None
    plain = planted.config
    one = plain.replace(calibration=dataclasses.replace(calib, exclude_nodes=("fc2", "fc1", "fc2")))
    assert one.calibration is not None and one.calibration.exclude_nodes == ("fc1", "fc2")
    assert one.config_hash != plain.config_hash
    assert '"exclude_nodes":["fc1","fc2"]' in one.canonical_json(one.data_sha256)
    assert "exclude_nodes" not in plain.canonical_json(plain.data_sha256)  # unset: earlier hashes stand
    with pytest.raises(ConfigError, match="implicit|explicit Q/DQ"):
        Calibration(algorithm="entropy2", exclude_nodes=("fc1",))
    with pytest.raises(ConfigError, match="list of ONNX node names"):
        Calibration(algorithm="minmax", exclude_nodes=("",))


def test_an_unknown_node_name_is_a_config_error(planted: Planted) -> None:
    from pytest_trt.calibration.explicit import calibrate_explicit

    calib = planted.config.calibration
    assert calib is not None
    bad = planted.config.replace(calibration=dataclasses.replace(calib, exclude_nodes=("fc9",)))
    with pytest.raises(ConfigError, match=r"names 'fc9', which .*planted.onnx has no node of \(did you mean 'fc3', 'fc2', 'fc1'\?\)"):
        calibrate_explicit(bad)


def test_search_finds_the_planted_node_and_writes_a_pin_that_reproduces_it(
        planted: Planted, expected_nodes: list[list[str]], tmp_path: Path) -> None:
    assert expected_nodes == [["fc2"]]  # independent: ORT's own quantizer, every set of one or two nodes
    out = tmp_path / "pin" / "reviewed.toml"
    out.parent.mkdir()
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden), "--json",
               "--write-pin", str(out), *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [doc["exclude_nodes"]] == expected_nodes and doc["stopped"] == "found"
    assert [(s["prefix"], s["passed"]) for s in doc["steps"]] == [(0, False), (3, True), (1, True)]
    assert doc["evaluations"] == 3 and doc["builds"] == 3 and doc["runs"] == 3
    assert doc["ranked"][0]["node"] == "fc2"
    # the pin loads, carries the set, and its engine gives the recovered metric
    from pytest_trt.sensitivity.evaluate import Evaluator

    pinned = BuildConfig.from_toml(out, "planted")
    assert pinned.calibration is not None and pinned.calibration.exclude_nodes == ("fc2",)
    assert pinned.config_hash == doc["pin_config_hash"]
    base = planted.config.calibration
    assert base is not None
    assert pinned.config_hash == planted.config.replace(
        calibration=dataclasses.replace(base, exclude_nodes=("fc2",))).config_hash
    from pytest_trt.compare.thresholds import ThresholdSet

    limits = ThresholdSet().with_overrides({"top1_drop": 0.02, "l2_delta": None, "drift_sd": None})
    again = Evaluator(pinned, planted.golden, limits)(pinned.calibration.exclude_nodes)
    assert again.passed
    assert again.checks == tuple(doc["steps"][-1]["checks"])
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# written by pytest-trt calib search")
    assert "# step 3: exclude top 1 (+fc2, own SQNR" in text


def test_text_output_says_what_ran(planted: Planted) -> None:
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden),
               *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "accuracy: the ONNX Runtime engine of each candidate, run on the golden dataset"
    assert lines[2].startswith("step 1: as pinned (no node excluded): FAIL: logits: Top-1 Acc drop")
    assert lines[-1].startswith('found: exclude_nodes = ["fc2"] (3 candidates, 3 builds, 3 golden runs, ')


def test_bisect_finds_the_same_set(planted: Planted) -> None:
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden), "--json",
               "--strategy", "bisect", *(a for t in LIMITS for a in ("--threshold", t)))
    doc = json.loads(proc.stdout)
    assert doc["exclude_nodes"] == ["fc2"]
    assert [(s["prefix"], s["passed"]) for s in doc["steps"]] == [(0, False), (3, True), (2, True), (1, True)]


def test_budget_stops_the_search(planted: Planted) -> None:
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden), "--json",
               "--budget", "1", *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["stopped"] == "budget" and doc["exclude_nodes"] is None and doc["evaluations"] == 1


def test_a_model_no_exclusion_helps_is_reported_within_budget(tmp_path: Path) -> None:
    """The golden was approved from another model's outputs: leaving every node in float still fails."""
    case = make_planted(tmp_path / "a", planted=True, name="hopeless")
    other = write_model(tmp_path / "other.onnx", seed=7)
    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

    x = golden_inputs()
    logits = float_run(other, x)
    settings = GoldenSettings(golden_dir=tmp_path / "g", update=True, approve="another model", rootdir=tmp_path)
    GoldenCheck(settings, config_provider=lambda: case.config).check(
        {"logits": logits}, dataset=GoldenDataset.from_arrays({"x": x}, labels=logits.argmax(1)),
        classifier=["logits"])
    proc = cli("calib", "search", str(case.pins), "hopeless", "--golden", str(tmp_path / "g" / "hopeless.h5"),
               "--json", "--budget", "3", *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["stopped"] == "no exclusion helps" and doc["evaluations"] == 2 and doc["exclude_nodes"] is None
    text = cli("calib", "search", str(case.pins), "hopeless", "--golden", str(tmp_path / "g" / "hopeless.h5"),
               "--budget", "3", *(a for t in LIMITS for a in ("--threshold", t)))
    assert "no exclusion helps: with all 3 ranked nodes in float the golden still fails" in text.stdout


def test_write_pin_never_overwrites_a_users_file(planted: Planted, tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text("# my pins\n", encoding="utf-8")
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden),
               "--write-pin", str(mine), *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 3 and "was not written by pytest-trt calib search" in proc.stderr
    assert mine.read_text(encoding="utf-8") == "# my pins\n"


def test_search_refuses_bad_thresholds_and_missing_snapshots(planted: Planted, tmp_path: Path) -> None:
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden),
               "--threshold", "top1=0.1")
    assert proc.returncode == 3 and "expected NAME=VALUE with NAME one of" in proc.stderr
    extra = tmp_path / "pins.toml"
    extra.write_text(planted.pins.read_text(encoding="utf-8").replace("configs.planted", "configs.renamed")
                     .replace('"planted.onnx"', json.dumps(str(planted.model))).replace(
                         '"calib.npz"', json.dumps(str(planted.folder / "calib.npz"))), encoding="utf-8")
    proc = cli("calib", "search", str(extra), "renamed", "--golden", str(planted.golden))
    assert proc.returncode == 3 and "has no snapshot 'renamed' (snapshots: planted)" in proc.stderr


# -- TensorRT-RTX: each candidate built for real ----------------------------------------------------------------

def _rtx() -> Any:
    from pytest_trt.backends.registry import module_available

    if not module_available("tensorrt-rtx"):
        pytest.skip("tensorrt_rtx is not installed")
    import tensorrt_rtx

    if not tensorrt_rtx.__version__.startswith("1.7"):
        pytest.skip(f"INT8 Q/DQ builds need TensorRT-RTX 1.7, not {tensorrt_rtx.__version__}")
    return tensorrt_rtx


def test_rtx_search_builds_each_candidate_and_checks_the_record(planted: Planted) -> None:
    _rtx()
    proc = cli("calib", "search", str(planted.pins), "planted", "--golden", str(planted.golden), "--json",
               "--backend", "tensorrt-rtx", *(a for t in LIMITS for a in ("--threshold", t)))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["exclude_nodes"] == ["fc2"]
    assert "ONNX Runtime's run of the same Q/DQ model" in doc["accuracy_note"]
    assert doc["builds"] == 6  # each candidate: one TensorRT-RTX build, one ONNX Runtime engine of its Q/DQ model
    assert all("excluded nodes in float" in s["notes"][0] for s in doc["steps"])


def test_rtx_record_shows_excluded_nodes_in_float(planted: Planted) -> None:
    _rtx()
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.sensitivity.evaluate import int8_nodes, with_exclusions

    backend = create_backend("tensorrt-rtx")
    for nodes in ((), ("fc2",)):
        config = with_exclusions(planted.config, nodes)
        result = backend.build_config(config)
        record = backend.record(result, config)
        compute = {n: [la for la in record.layers if la.kind == "compute" and n in la.origins] for n in NODES}
        fc1_and_fc3 = {"fc1", "fc3"}
        reads_int8 = {n for n, layers in compute.items()
                      if any(t.dtype == "Int8" for la in layers for t in la.inputs)}
        assert ("fc2" in reads_int8) == (not nodes)
        assert fc1_and_fc3 <= reads_int8  # the nodes not excluded stay INT8
        assert [n.split(" ")[0] for n in int8_nodes(record, ("fc2",))] == ([] if nodes else ["fc2"])


def test_ranking_counts_a_quantized_writer_and_skips_what_the_quantizer_passes_over() -> None:
    """``s = sq(h)`` is quantized at sq's output and at fc2's input: both must go to float, fc2 and sq first;
    ``div`` reads a quantized tensor but is no op the quantizer handles, so it is never a candidate."""
    from pytest_trt.sensitivity.tensor_errors import TensorError, TensorErrors

    def act(tensor: str, producer: str | None, consumers: tuple[str, ...], db: float, acc: float) -> TensorError:
        return TensorError(tensor, "activation", producer, consumers, db, 10 ** (-db / 20), 0.0, 1.0, acc)

    # accumulated SQNR falls downstream (h2 is worst there); the ranking is by each tensor's own error
    errors = TensorErrors((act("s", "sq", ("fc2",), 3.0, 3.0), act("h", "fc1", ("sq", "div"), 30.0, 29.0),
                           act("x", None, ("fc1",), 40.0, 40.0), act("h2", "fc2", ("fc3",), 35.0, 1.0)),
                          8, 1, 0.0, "f.onnx", "q.onnx", frozenset({"fc1", "sq", "fc2", "fc3"}))
    assert errors.ranked_nodes() == [("fc2", 3.0), ("sq", 3.0), ("fc1", 30.0), ("fc3", 35.0)]


def test_digits_incident_search_names_the_first_convolution(incident_configs: Any, tmp_path: Path) -> None:
    """The examples' incident: min-max INT8 of the digits classifier, golden approved from the float model on the
    597 held-out images.  The outliers' gain spoils the input's range (the worst own SQNR), while the accumulated
    error is worst deep in the network; leaving the input's one reader in float recovers top-1."""
    from examples.calibration.incident import golden_dataset
    from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

    _, upgraded = incident_configs
    calib = upgraded.calibration
    pins = tmp_path / "pins.toml"
    pins.write_text(f'[configs.digits_mnet]\nversion = "1.0.0"\nonnx = {json.dumps(str(upgraded.onnx))}\n'
                    'precision = "int8"\nprofiles = [{input = [[1, 1, 8, 8], [64, 1, 8, 8], [256, 1, 8, 8]]}]\n\n'
                    f'[configs.digits_mnet.calibration]\nalgorithm = "minmax"\ndata = {json.dumps(calib.data)}\n'
                    'batch_size = 8\n', encoding="utf-8")
    assert BuildConfig.from_toml(pins, "digits_mnet").config_hash == upgraded.config_hash
    data = golden_dataset()
    logits = float_run_input(upgraded.onnx, data.inputs["input"])
    settings = GoldenSettings(golden_dir=tmp_path / "golden", update=True, approve="float", rootdir=tmp_path)
    GoldenCheck(settings, config_provider=lambda: upgraded).check({"logits": logits}, dataset=data,
                                                                   classifier=["logits"])
    proc = cli("calib", "search", str(pins), "digits_mnet", "--golden", str(tmp_path / "golden" / "digits_mnet.h5"),
               "--json", "--threshold", "top1_drop=0.02", "--threshold", "l2_delta=none")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["exclude_nodes"] == ["/stem/stem.0/Conv"]
    assert [(s["prefix"], s["passed"]) for s in doc["steps"]] == [(0, False), (17, True), (1, True)]
    top1 = [c for c in doc["steps"][-1]["checks"] if c["metric"] == "top1_drop" and c["tag"] is None][0]
    assert top1["value"] >= -0.02


def float_run_input(model: Path, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"input": x})[0])


def test_implicit_int8_refuses_exclude_nodes(planted: Planted) -> None:
    """TensorRT <= 10 calibrates implicit INT8 with its calibrators: no node can be left out by name there."""
    from pytest_trt.backends.trt_features import check_calibration
    from pytest_trt.errors import UnsupportedOption

    def refuse(option: str, why: str) -> UnsupportedOption:
        return UnsupportedOption(why, backend="tensorrt", option=option)

    calib = Calibration(algorithm="minmax", data=str(planted.folder / "calib.npz"), exclude_nodes=("fc2",))
    implicit = _implicit_features()
    with pytest.raises(UnsupportedOption, match="calibrates implicit INT8, where no node can be left out") as exc:
        check_calibration(calib, "int8", implicit, "TensorRT 10.13", refuse)
    assert exc.value.context["option"] == "calibration.exclude_nodes"
    assert check_calibration(dataclasses.replace(calib, exclude_nodes=()), "int8", implicit, "TensorRT 10.13",
                             refuse) == "int8"


def _implicit_features() -> Any:
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "foundation"))
    from test_features import TRT10  # the API namespace of TensorRT 10 the feature tests probe

    from pytest_trt.backends.trt_features import probe

    return probe(TRT10)
