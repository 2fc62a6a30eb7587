"""``--localize`` on a planted regression: the first diverging ONNX node, its fusion group, the error growth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import HAS_ORT
from tests.upgrade.conftest import ROOT
from tests.upgrade.planted import FACTOR, PLANTED_NODE, write_planted

pytestmark = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed")


def _feeds() -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(3).random((4, 3, 32, 32), dtype=np.float32)}


def test_bisection_finds_the_planted_node(tmp_path: Path) -> None:
    import onnx

    from examples.models import mobilenet_v2
    from pytest_trt.upgrade.localize import Runner, localize_pair

    old = Runner(mobilenet_v2(), "all")
    new = Runner(onnx.load(write_planted(tmp_path / "planted.onnx")), "all")
    found = localize_pair(old, new, _feeds(), compared="OLD vs NEW")
    assert found.node == PLANTED_NODE
    assert found.path[0] == (PLANTED_NODE, pytest.approx(FACTOR - 1.0, rel=1e-5))  # ||3y - y|| / ||y||
    assert found.path[-1][0] == "classifier" and found.path[-1][1] > 0.1
    nodes = len(mobilenet_v2().graph.node)
    assert found.steps <= int(np.ceil(np.log2(nodes))) + 1 < nodes  # bisection, not a scan


def test_engine_matches_its_unoptimized_reference() -> None:
    from examples.models import mobilenet_v2
    from pytest_trt.upgrade.localize import Runner, localize_pair

    model = mobilenet_v2()
    found = localize_pair(Runner(model, "disabled"), Runner(model, "all"), _feeds(),
                          compared="engine vs unoptimized reference")
    assert found.node is None and found.note.startswith("no node diverges beyond 0.001")


def test_cli_localize_on_the_planted_run(ort_runs: tuple[Path, Path, Path], ort_planted: Path,
                                         tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "upgrade-report", ort_runs[0], ort_planted,
                          "--localize", "--json", "-o", tmp_path / "r.html"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    doc = json.loads(run.stdout)
    loc = {c["config"]: c for c in doc["configs"]}["mobilenet_v2_labelled_ort"]["localization"]
    assert loc["node"] == PLANTED_NODE and loc["compared"] == "OLD vs NEW built models" and loc["bisected"]
    assert PLANTED_NODE in loc["group"] and "block3/bn_project" in loc["group"]  # ORT fused conv with its BN
    html = (tmp_path / "r.html").read_text()
    assert f"first diverging ONNX node: <code>{PLANTED_NODE}</code>" in html


def _relu_or_clip(act: str) -> object:
    """Conv -> Relu (OLD) or Clip(0, 0.5) (NEW), both writing tensor a1 -> Conv -> Relu."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "W2")
    inits = [w1, w2]
    nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], name="/layer3/layer3.0/conv1/Conv", pads=[1, 1, 1, 1])]
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c1"], ["a1"], name="/layer3/layer3.0/relu_1/Relu"))
    else:
        nodes.append(helper.make_node("Clip", ["c1", "lo", "hi"], ["a1"], name="/layer3/layer3.0/relu_1/Clip"))
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(0.5, np.float32), "hi")]
    nodes.append(helper.make_node("Conv", ["a1", "W2"], ["c2"], name="/layer3/layer3.1/conv1/Conv", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c2"], ["y"], name="/layer3/layer3.1/relu/Relu"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_replaced_node_is_found_by_the_tensor_it_produces() -> None:
    from pytest_trt.upgrade.localize import Runner, localize_pair

    feeds = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    found = localize_pair(Runner(_relu_or_clip("relu"), "disabled"), Runner(_relu_or_clip("clip"), "disabled"),
                          feeds, compared="OLD vs NEW")
    # the Clip (max 0.5) is where the outputs part: not the next Conv, which a by-name match would blame
    assert found.node == "/layer3/layer3.0/relu_1/Clip" and found.replaces == "/layer3/layer3.0/relu_1/Relu"
    assert found.tensor == "a1"
