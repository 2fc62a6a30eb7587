"""BuildRecord from the ONNX Runtime graph diff: fusions, origins, precisions, transformers fired."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from pytest_trt.config import BuildConfig, OrtOptions
from pytest_trt.engines.engine import Engine
from tests.conftest import needs_ort

pytestmark = needs_ort
LEVELS = ("extended", "all")  # "all" adds the NCHWc layout rewrite, which renames every tensor


def _engine(path: Path, level: str, name: str = "m") -> Engine:
    from pytest_trt.backends.onnxruntime import OrtBackend

    backend = OrtBackend()
    config = BuildConfig(name=name, onnx=path, ort=OrtOptions(graph_optimization_level=level))
    return Engine(config, backend.build_config(config), backend)


def _chain(tmp_path: Path, ops: list[str], name: str) -> Path:
    """input -> Conv(conv1) -> <ops...> -> Conv(conv2): each op named <op lower>1."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (8, 8, 3, 3)))]
    nodes = [helper.make_node("Conv", ["input", "w1"], ["t0"], name="conv1", pads=[1, 1, 1, 1])]
    for i, op in enumerate(ops):
        extra = []
        if op == "Clip":
            inits += [numpy_helper.from_array(np.array(v, np.float32), f"clip_{k}") for k, v in (("lo", 0.0), ("hi", 6.0))]
            extra = ["clip_lo", "clip_hi"]
        nodes.append(helper.make_node(op, [f"t{i}", *extra], [f"t{i + 1}"], name=f"{op.lower()}1"))
    nodes.append(helper.make_node("Conv", [f"t{len(ops)}", "w2"], ["out"], name="conv2", pads=[1, 1, 1, 1]))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 8, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("level", LEVELS)
def test_conv_bn_relu_is_one_layer_with_three_origins(models: dict[str, Path], level: str) -> None:
    engine = _engine(models["conv_bn_relu"], level)
    compute = [layer for layer in engine.record.layers if layer.kind == "compute"]
    assert len(compute) == 1 and compute[0].origins == ("conv1", "bn1", "relu1")
    assert compute[0].precision == "Float"
    engine.assert_fused("conv1", "bn1", "relu1")
    expected_pass = "ConvActivationFusion" if level == "extended" else "NchwcTransformer"
    assert {(e.pass_name, e.first, e.second) for e in engine.record.fusion_events} == {
        (expected_pass, "conv1", "bn1"), (expected_pass, "conv1", "relu1")}
    assert engine.record.source == "onnxruntime" and engine.record.backend_version == engine.result.versions["onnxruntime"]
    assert engine.record.origins_exact


@pytest.mark.parametrize("level", LEVELS)
def test_conv_clip_relu6_is_fused(tmp_path: Path, level: str) -> None:
    engine = _engine(_chain(tmp_path, ["Clip"], "conv_clip"), level)
    engine.assert_fused("conv1", "clip1")
    engine.assert_no_fusion("clip1", "conv2")
    fused = [layer for layer in engine.record.layers if layer.is_fusion]
    assert [layer.origins for layer in fused] == [("conv1", "clip1")]


@pytest.mark.parametrize("level", LEVELS)
def test_unfusable_chain_stays_apart(tmp_path: Path, level: str) -> None:
    # ORT 1.32 fuses Conv with Relu/Clip/Sigmoid/Tanh/LeakyRelu/HardSigmoid, not with Exp
    engine = _engine(_chain(tmp_path, ["Exp"], "conv_exp"), level)
    engine.assert_no_fusion("conv1", "exp1")
    engine.assert_no_fusion("exp1", "conv2")
    assert not engine.record.fusions
    owners = {o: layer.name for layer in engine.record.layers for o in layer.origins}
    assert set(owners) == {"conv1", "exp1", "conv2"}


@pytest.mark.parametrize("level", LEVELS)
def test_mobilenet_record(models: dict[str, Path], level: str) -> None:
    engine = _engine(models["mobilenet_v2"], level, name="mobilenet_v2")
    record = engine.record
    engine.assert_fused("block1/conv_dw", "block1/relu6")
    engine.assert_fused("*/conv_dw", "*/bn_dw", "*/relu6")
    engine.assert_no_fusion("block1/relu6", "block1/conv_project")
    engine.assert_precision("block3/conv_dw", "fp32")
    # every original node is implemented by exactly one layer
    original = [n.name for n in onnx.load(str(models["mobilenet_v2"])).graph.node]
    claimed = [o for layer in record.layers for o in layer.origins]
    assert sorted(claimed) == sorted(original)
    assert dict(record.layer_counts)["Original"] == len(original)
    fired = {m.text for m in record.messages if m.severity == "INFO"}
    assert "GraphTransformer ConvActivationFusion modified: 1" in fired
    if level == "all":
        # the residual Add is absorbed by the NCHWc conv's Sum input
        engine.assert_fused("block3/conv_project", "block3/add")
        engine.assert_warning("hardware specific optimizations")
        assert any(layer.kind == "reformat" and not layer.origins for layer in record.layers)
    else:
        engine.assert_no_warning("hardware specific")


def test_qdq_model_shows_int8_layers(tmp_path: Path) -> None:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    float_model = _chain(tmp_path, ["Sigmoid"], "conv_sigmoid")
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{"input": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    quantized = tmp_path / "conv_sigmoid_qdq.onnx"
    quantize_static(str(float_model), str(quantized), Reader(), quant_format=QuantFormat.QDQ)
    for level in LEVELS:
        engine = _engine(quantized, level)
        engine.assert_precision("conv1", "int8")
        engine.assert_precision("conv2", "int8")
        conv1 = next(layer for layer in engine.record.layers if "conv1" in layer.origins)
        assert conv1.type.endswith("QLinearConv")
        # the QLinearConv replaced DQ(input), DQ(weight), Conv and the Q after it
        assert set(conv1.origins) == {"input_DequantizeLinear", "w1_DequantizeLinear", "conv1", "t0_QuantizeLinear"}


def test_record_from_models_without_a_log(models: dict[str, Path]) -> None:
    import onnxruntime as ort

    from pytest_trt.buildlog.ort_record import record_from_models

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(Path(models["conv_bn_relu"]).with_name("cbr_ext.onnx"))
    ort.InferenceSession(str(models["conv_bn_relu"]), so, providers=["CPUExecutionProvider"])
    record = record_from_models(onnx.load(str(models["conv_bn_relu"])), onnx.load(so.optimized_model_filepath))
    assert [layer.origins for layer in record.layers] == [("conv1", "bn1", "relu1")]
    assert record.fusion_events[0].pass_name is None  # no log: the transformer is unknown
    assert record.messages == () and record.total_lines == 0


def test_parse_ort_log_lines() -> None:
    from pytest_trt.buildlog.ort_record import parse_ort_log, transformers_fired

    text = (
        "stray native output\n"
        "2026-01-02 03:04:05.100000000 [I:onnxruntime:pytest-trt, graph_transformer.cc:15 Apply] "
        "GraphTransformer ConvActivationFusion modified: 2 with status: OK\n"
        "\x1b[0;93m2026-01-02 03:04:05.300000000 [W:onnxruntime:, x.cc:1 f] careful\x1b[m\n"
        "continued line\n"
        "2026-01-02 03:04:05.400000000 [E:onnxruntime:, y.cc:2 g] broken\n"
    )
    entries, unparsed = parse_ort_log(text, start=0.0)  # start far from the stamps: times relative to the first line
    assert unparsed == 1
    assert [e.severity for e in entries] == ["INFO", "INFO", "WARNING", "ERROR"]
    assert entries[2].text == "[x.cc:1 f] careful\ncontinued line"
    assert [round(e.time, 3) for e in entries] == [0.0, 0.0, 0.2, 0.3]
    assert transformers_fired(entries) == {"ConvActivationFusion": 2}


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parse_ort_log_never_crashes(text: str) -> None:
    from pytest_trt.buildlog.ort_record import parse_ort_log

    entries, unparsed = parse_ort_log(text, start=0.0)
    assert unparsed <= len(entries)
