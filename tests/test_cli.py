"""The pytest-trt command line, run as a real subprocess: output text and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.cli import EXIT_FAILED, EXIT_FILE, EXIT_OK, EXIT_USAGE
from pytest_trt.config import BuildConfig
from tests.conftest import HAS_RTX, RTX_VERSION, needs_rtx

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "tests" / "data" / "trt_logs" / "log_rtx1.7.1_mobilenet_v2_detailed.txt"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Bundles of two real TensorRT-RTX builds: profile max batch 32 and 64."""
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed")
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.buildlog.readers import parse_entries
    from tests.audit.rtx_build import build_mobilenet

    env = capture_environment(backend="tensorrt-rtx", rootdir=None)
    out = []
    for batch in (32, 64):
        result = build_mobilenet(max_batch=batch)
        folder = tmp_path_factory.mktemp(f"b{batch}")
        out.append(write_bundle(result, folder, record=parse_entries(result.log), environment=env).path)
    return out[0], out[1]


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout


@needs_rtx
def test_verify_ok_and_json(bundles):
    proc = cli("bundle", "verify", *bundles)
    assert proc.returncode == EXIT_OK, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("OK      ") and line.endswith("6 members, unsigned") for line in lines)
    doc = json.loads(cli("bundle", "verify", "--json", bundles[0]).stdout)
    assert doc["exit_code"] == 0 and doc["results"][0]["ok"] is True and "engine.plan" in doc["results"][0]["members"]


@needs_rtx
def test_verify_reports_tampering_with_exit_1(bundles, tmp_path):
    from pytest_trt.audit.archive import tar_gz_bytes
    from tests.audit.conftest import read_members

    members = read_members(bundles[0])
    members["config.json"] = members["config.json"].replace(b'"precision":"typed"', b'"precision":"fp16!"')
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(tar_gz_bytes(members))
    proc = cli("bundle", "verify", bundles[0], bad)
    assert proc.returncode == EXIT_FAILED
    assert proc.stdout.splitlines()[1].startswith(f"FAILED  {bad}: member config.json: sha256 mismatch: manifest ")
    _no_traceback(proc)
    doc = json.loads(cli("bundle", "verify", "--json", bad).stdout)
    assert doc["results"][0]["member"] == "config.json"


def test_missing_file_is_exit_3_without_traceback(tmp_path):
    proc = cli("bundle", "verify", tmp_path / "nope.tar.gz")
    assert proc.returncode == EXIT_FILE
    assert proc.stdout.strip() == f"ERROR   {tmp_path / 'nope.tar.gz'}: no such file"
    for args in (("bundle", "show", tmp_path / "nope"), ("log", "parse", tmp_path / "nope.log"),
                 ("golden", "show", tmp_path / "g.h5"), ("bundle", "diff", tmp_path / "a", tmp_path / "b")):
        proc = cli(*args)
        assert proc.returncode == EXIT_FILE, args
        assert proc.stderr.startswith("pytest-trt: ") and proc.stderr.count("\n") == 1, proc.stderr
        _no_traceback(proc)


def test_usage_errors_exit_2():
    proc = cli("bundle", "frobnicate")
    assert proc.returncode == EXIT_USAGE and "invalid choice" in proc.stderr
    assert cli().returncode == EXIT_USAGE
    help_text = cli("--help").stdout
    assert "exit codes: 0 ok; 1 verification failed or differences found; 2 usage error; 3 file error" in help_text


@needs_rtx
def test_show(bundles):
    proc = cli("bundle", "show", bundles[0])
    assert proc.returncode == EXIT_OK, proc.stderr
    out = proc.stdout
    assert "config: mobilenet_v2 v1.2.3  precision typed" in out
    assert "backend: tensorrt-rtx (" in out and f"tensorrt_rtx {RTX_VERSION}" in out
    doc = json.loads(cli("bundle", "show", "--json", bundles[0]).stdout)
    layers = doc["record_summary"]["layers"]
    assert layers >= 19 and doc["config"]["pinned"]["name"] == "mobilenet_v2"  # 19 with TensorRT-RTX 1.7, 20 with 1.4
    assert f"layers: {layers} (" in out and "precisions: " in out and "golden: not checked" in out


@needs_rtx
def test_diff_exit_codes_and_text(bundles):
    same = cli("bundle", "diff", bundles[0], bundles[0])
    assert same.returncode == EXIT_OK and same.stdout.rstrip().endswith("no differences")
    proc = cli("bundle", "diff", *bundles)
    assert proc.returncode == EXIT_FAILED
    for expected in ("config: ", "pinned.profiles.0.input.max.0: 32 -> 64", "build: ", "engine_sha256: ",
                     "record:", "tactic changes"):
        assert expected in proc.stdout, proc.stdout
    record = json.loads(cli("bundle", "diff", "--json", *bundles).stdout)["record"]
    assert record and not record["is_empty"]
    if record["layer_count"]:  # 19 -> 20 with TensorRT-RTX 1.7; 1.4 keeps 20 layers and changes tactics and memory
        assert "engine layers: {} -> {}".format(*record["layer_count"]) in proc.stdout
    masked = cli("bundle", "diff", "--mask-tactics", *bundles)
    assert "tactic changes" not in masked.stdout
    doc = json.loads(cli("bundle", "diff", "--json", *bundles).stdout)
    assert doc["identical"] is False and doc["record"] is not None


def test_log_parse_of_a_real_log():
    proc = cli("log", "parse", LOG)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert proc.stdout.startswith(f"log: {LOG}\nrecord: tensorrt-log")
    assert "fusions: " in proc.stdout and "  fused: " in proc.stdout
    doc = json.loads(cli("log", "parse", "--json", LOG).stdout)
    assert doc["summary"]["layers"] == len(doc["record"]["layers"]) > 0


def test_log_parse_names_the_backend_from_the_cache_entry_beside_the_log(tmp_path):
    # an RTX log never names the library's version: alone it says so; in a cache entry, build.json does
    alone = cli("log", "parse", LOG)
    assert alone.stdout.splitlines()[1] == "record: tensorrt-log (backend and version not named in the log)"
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "build.log").write_bytes(LOG.read_bytes())
    (entry / "build.json").write_text(json.dumps({"backend": "tensorrt-rtx", "backend_version": "1.7.1.116"}))
    proc = cli("log", "parse", entry / "build.log")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert proc.stdout.splitlines()[1] == (
        f"record: tensorrt-log (tensorrt-rtx 1.7.1.116, from {entry / 'build.json'})")
    doc = json.loads(cli("log", "parse", "--json", entry / "build.log").stdout)
    assert (doc["summary"]["backend"], doc["summary"]["backend_version"]) == ("tensorrt-rtx", "1.7.1.116")
    (entry / "build.json").write_text("{not json")  # a broken build.json is ignored, not an error
    assert cli("log", "parse", entry / "build.log").stdout.splitlines()[1].endswith("not named in the log)")


def test_golden_show_of_a_real_golden_file(tmp_path):
    import numpy as np

    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.updating import create_golden

    path = tmp_path / "mnv2.h5"
    inputs = {"input": np.zeros((6, 3, 8, 8), np.float32)}
    create_golden(path, GoldenDataset.from_arrays(inputs, labels=np.array([0, 1, 2, 0, 1, 2])))
    proc = cli("golden", "show", path)
    assert proc.returncode == EXIT_OK, proc.stderr
    assert f"golden file: {path}" in proc.stdout and "dataset: 6 samples" in proc.stdout
    assert "labels: 6 (3 classes)" in proc.stdout
    doc = json.loads(cli("golden", "show", "--json", path).stdout)
    assert doc["dataset"]["samples"] == 6 and doc["snapshots"] == {}
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not hdf5")
    broken = cli("golden", "show", bad)
    assert broken.returncode == 3 and "Traceback" not in broken.stderr and "bad.h5" in broken.stderr


# -- onnx nodes ---------------------------------------------------------------------------------------------------


def _model_with_a_subgraph(path: Path) -> Path:
    """x -> fc1 (MatMul) -> relu (Relu) -> gate (If: then Identity 'then_id', else Neg 'else_neg'); one unnamed Abs."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def branch(name: str, op: str) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node(op, ["hr"], [f"{name}_out"], name=name)], name, [],
                                 [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, None)])

    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu"),
             helper.make_node("Abs", ["hr"], ["habs"]),
             helper.make_node("If", ["cond"], ["y"], name="gate", then_branch=branch("then_id", "Identity"),
                              else_branch=branch("else_neg", "Neg"))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                     helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("habs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_onnx_nodes_lists_names_op_types_and_outputs(tmp_path):
    model = _model_with_a_subgraph(tmp_path / "m.onnx")
    proc = cli("onnx", "nodes", model, "--json")
    assert proc.returncode == EXIT_OK, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(n["name"], n["op_type"], n["outputs"], n["parent"]) for n in doc["nodes"]] == [
        ("fc1", "MatMul", ["h"], None), ("relu", "Relu", ["hr"], None), ("", "Abs", ["habs"], None),
        ("gate", "If", ["y"], None), ("else_neg", "Neg", ["else_neg_out"], "gate"),
        ("then_id", "Identity", ["then_id_out"], "gate")]  # the If's branches in its attributes' order
    assert doc["opsets"] == {"ai.onnx": 17} and doc["unnamed"] == 1
    text = cli("onnx", "nodes", model)
    assert text.returncode == EXIT_OK
    lines = text.stdout.splitlines()
    assert lines[0] == f"model: {model}  opset 17, 6 nodes"
    assert lines[1].split() == ["name", "op", "outputs"]
    assert [line.split() for line in lines[2:8]] == [
        ["fc1", "MatMul", "h"], ["relu", "Relu", "hr"], ["(unnamed)", "Abs", "habs"], ["gate", "If", "y"],
        ["else_neg", "Neg", "else_neg_out", "(in", "gate)"], ["then_id", "Identity", "then_id_out", "(in", "gate)"]]
    assert "1 node(s) have no name in this model, so no assertion can name them" in text.stdout


def test_onnx_nodes_op_filter_and_a_filter_that_matches_nothing(tmp_path):
    model = _model_with_a_subgraph(tmp_path / "m.onnx")
    proc = cli("onnx", "nodes", model, "--op", "matmul", "--op", "Neg", "--json")
    assert proc.returncode == EXIT_OK
    assert [n["name"] for n in json.loads(proc.stdout)["nodes"]] == ["fc1", "else_neg"]
    none = cli("onnx", "nodes", model, "--op", "Conv")
    assert none.returncode == EXIT_FAILED
    assert ("no node has op type Conv; op types here: Abs (1), Identity (1), If (1), MatMul (1), Neg (1), Relu (1)"
            in none.stdout)


def test_onnx_nodes_file_problems_are_exit_3_without_traceback(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "text.onnx").write_text("not a model\n")
    for path, text in ((tmp_path / "missing.onnx", "no such file"), (tmp_path, "is a directory"),
                       (tmp_path / "empty.onnx", "not an ONNX model"), (tmp_path / "text.onnx", "not a")):
        proc = cli("onnx", "nodes", path)
        assert proc.returncode == EXIT_FILE, path
        assert proc.stderr.startswith(f"pytest-trt: {path}: {text}")
        _no_traceback(proc)


def test_the_readme_asserts_on_node_names_the_example_models_have(tmp_path):
    """Every node name an assertion of README.md names is in the example model its snippet builds."""
    import re

    from examples.models import write_all

    models = write_all(tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    names = {"mobilenet_v2": set(), "digits_mnet": set()}
    for call in re.finditer(r"assert_(?:fused|no_fusion|int8)\(([^)]*)\)", readme):
        args = re.findall(r'"([^"]+)"', call.group(1))
        names["digits_mnet" if any(a.startswith("/") for a in args) else "mobilenet_v2"].update(args)
    assert names["mobilenet_v2"] and names["digits_mnet"]
    paths = {"mobilenet_v2": models["mobilenet_v2"], "digits_mnet": ROOT / "examples/calibration/digits_mnet.onnx"}
    for model, wanted in names.items():
        proc = cli("onnx", "nodes", paths[model], "--json")
        known = {n["name"] for n in json.loads(proc.stdout)["nodes"]}
        assert wanted <= known, (model, sorted(wanted - known))


def _bundle_member(bundle: Path, member: str) -> dict:
    import tarfile

    with tarfile.open(bundle) as tar:
        for info in tar.getmembers():
            if info.name.endswith(member):
                f = tar.extractfile(info)
                assert f is not None
                return json.loads(f.read())
    raise AssertionError(f"{member} not in {bundle}")


def test_bundle_show_names_the_calibration(tmp_path):
    """A calibrated ONNX Runtime build: the algorithm asked for, its mode, and the digests its build recorded;
    a plain build says none."""
    from examples.calibration.incident import configs, write_calibration_set
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.calibration.store import set_store_root
    from pytest_trt.testing import write_classifier

    set_store_root(tmp_path / "store")
    try:
        _, minmax = configs(write_calibration_set(tmp_path / "calibration.npz"))
        env = capture_environment(backend="onnxruntime", rootdir=None)
        calibrated = write_bundle(OrtBackend().build_config(minmax), tmp_path / "q", record=None, environment=env).path
        plain_config = BuildConfig(name="plain", onnx=write_classifier(tmp_path / "plain.onnx"))
        plain = write_bundle(OrtBackend().build_config(plain_config), tmp_path / "p", record=None, environment=env).path
    finally:
        set_store_root(None)
    recorded = _bundle_member(calibrated, "build.json")["build"]["extra"]["calibration"]
    proc = cli("bundle", "show", calibrated)
    assert proc.returncode == EXIT_OK, proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("calibration:")]
    assert line.startswith(f"calibration: {minmax.calibration.algorithm} (explicit; ")
    for key, shown in (("data_sha256", "data sha256"), ("qdq_model_sha256", "Q/DQ")):
        assert f"{shown} {recorded[key][:8]}…" in line
    assert f"; {len(recorded['ranges'])} tensors; exclude_nodes none" in line
    assert "calibration: none" in cli("bundle", "show", plain).stdout.splitlines()


def test_golden_tolerance_reports_noise_and_suggestions(tmp_path):
    """``golden tolerance``: the engine (ONNX Runtime, optimizations on) against its reference, a second run and a
    rebuild; the engine-vs-reference figures equal two ONNX Runtime sessions made here."""
    import numpy as np
    import onnxruntime as ort

    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.updating import create_golden
    from tests.ort_models import conv_bn_relu

    conv_bn_relu(tmp_path / "cbr.onnx")
    pins = tmp_path / "pins.toml"
    pins.write_text('[configs.cbr]\nversion = "1"\nonnx = "cbr.onnx"\n', encoding="utf-8")
    x = np.random.default_rng(11).standard_normal((40, 3, 8, 8)).astype(np.float32)
    create_golden(str(tmp_path / "cbr.h5"), GoldenDataset.from_arrays({"x": x}))
    outs = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        outs.append(ort.InferenceSession(str(tmp_path / "cbr.onnx"), so,
                                         providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].astype(np.float64))
    l2 = float(np.linalg.norm(outs[0] - outs[1]) / np.linalg.norm(outs[1]))
    proc = cli("golden", "tolerance", pins, "cbr", "--golden", tmp_path / "cbr.h5", "--runs", "2", "--rebuilds", "1",
               "--margin", "10", "--json")
    assert proc.returncode == EXIT_OK, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["comparisons"] == ["engine vs reference", "run to run", "rebuild to rebuild"]
    vs_ref = doc["per_comparison"]["engine vs reference"]["features"]
    assert vs_ref["l2_delta"] == pytest.approx(l2, rel=0.25) and vs_ref["samples"] == 40
    assert doc["per_comparison"]["run to run"]["features"]["max_abs"] == 0.0  # ONNX Runtime on a CPU repeats itself
    worst = doc["outputs"]["features"]
    assert doc["suggested"]["features"]["l2_delta"] == pytest.approx(max(10 * worst["l2_delta"], 1e-6))
    assert doc["suggested"]["features"]["max_abs"] == pytest.approx(max(10 * worst["max_abs"], 1e-6))
    text = cli("golden", "tolerance", pins, "cbr", "--golden", tmp_path / "cbr.h5").stdout
    assert "features: suggested (noise x 3): l2_delta=" in text and "features: max abs " in text
    bad = cli("golden", "tolerance", pins, "nope", "--golden", tmp_path / "cbr.h5")
    assert bad.returncode == EXIT_FILE and "nope" in bad.stderr
    _no_traceback(bad)
    missing = cli("golden", "tolerance", pins, "cbr", "--golden", tmp_path / "none.h5")
    assert missing.returncode == EXIT_FILE and "none.h5: no such golden file" in missing.stderr


def test_the_command_line_imports_no_numpy_to_read_its_arguments() -> None:
    """Every ``pytest-trt`` call builds the whole parser first: no command group may import numpy (~30 ms) for it."""
    code = ("import sys; from pytest_trt.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('numpy', 'h5py', 'onnxruntime', 'tensorrt_rtx') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
