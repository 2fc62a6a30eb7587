"""Assertions over build records, with their failure texts, on real logs of the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_trt.buildlog import (
    BuildRecord,
    UnknownNodeError,
    assert_fused,
    assert_layer_count,
    assert_no_fusion,
    assert_no_warning,
    assert_precision,
    assert_warning,
    read_layer_json,
    read_log,
)


@pytest.fixture(scope="module")
def trt86(corpus: Path) -> BuildRecord:
    return read_log(corpus / "log_trt8.6.0_cookbook_mnist_fp16_trtexec_verbose.txt")


def test_fused_passes(rtx17: BuildRecord, trt86: BuildRecord) -> None:
    assert_fused(rtx17, "block1/conv_dw", "block1/bn_dw", "block1/relu6")
    assert_fused(trt86, "Conv-1", "ReLU-2")


def test_fused_fails_with_layers_and_next_step(rtx17: BuildRecord) -> None:
    with pytest.raises(AssertionError) as info:
        assert_fused(rtx17, "conv1", "classifier", label="mnv2-fp32")
    text = str(info.value)
    assert not isinstance(info.value, UnknownNodeError)
    assert text.startswith("mnv2-fp32: expected 'conv1', 'classifier' fused into one layer, but no layer holds all")
    assert "__myl_CorrMulAddRelu_myl0_2" in text and "origins=['conv1', 'bn1', 'relu1']" in text
    assert "__myl_FcAdd_myl0_18" in text and "type=runtime_fusion" in text and "precision=Float" in text
    assert "Next:" in text


def test_no_fusion_fails_on_the_depthwise_relu6_fusion(rtx17: BuildRecord) -> None:
    with pytest.raises(AssertionError) as info:
        assert_no_fusion(rtx17, "block1/conv_dw", "block1/relu6", label="mnv2")
    text = str(info.value)
    assert "mnv2: expected 'block1/conv_dw', 'block1/relu6' NOT to be fused, but 1 layer(s) hold all of them" in text
    assert "__myl_CorrMulAddMaxMin_myl0_3" in text
    assert "origins=['block1/conv_dw', 'block1/bn_dw', 'block1/relu6']" in text
    assert "subgraph={ForeignNode[conv1...classifier_3]}" in text and "re-validate accuracy" in text


def test_no_fusion_passes_when_apart(rtx17: BuildRecord) -> None:
    assert_no_fusion(rtx17, "block1/relu6", "block2/conv_dw")


def test_glob_and_regex_patterns(rtx17: BuildRecord) -> None:
    assert_fused(rtx17, "block3/conv_d?", "re:block3/relu6")
    with pytest.raises(AssertionError, match="5 layer\\(s\\) hold all of them"):  # every block's dw conv + relu6
        assert_no_fusion(rtx17, "*/conv_dw", "re:block\\d/relu6")
    assert_precision(rtx17, "block*", "float")


def test_exact_name_with_glob_characters(trt86: BuildRecord) -> None:
    # "[" would read as a glob; the exact name wins when it is a node
    record = read_layer_json(Path(__file__).parents[1] / "data" / "trt_logs" / "layers_trt8.2.3_cookbook_mnist_namesonly.json")
    assert "b3/read:0" in record.all_origins()
    assert_fused(record, "MatMul", "b3/read:0")


def test_unknown_node_lists_closest_names(rtx17: BuildRecord) -> None:
    with pytest.raises(UnknownNodeError) as info:
        assert_fused(rtx17, "block1/conv_dww", "block1/relu6")
    err = info.value
    assert err.name == "block1/conv_dww" and err.candidates[0] == "block1/conv_dw"
    assert "no ONNX node matches 'block1/conv_dww' (exact match against 46 nodes)" in str(err)
    assert "Closest names: 'block1/conv_dw'" in str(err)
    with pytest.raises(UnknownNodeError, match="glob match"):
        assert_no_fusion(rtx17, "block9/*", "conv1")
    with pytest.raises(UnknownNodeError, match="regex match"):
        assert_precision(rtx17, "re:nothing.*", "fp32")


def test_record_without_layer_listing_says_how_to_get_one(corpus: Path) -> None:
    record = read_log(corpus / "log_trt8.6.1_cookbook_polygraphy_run_verbose.txt")
    with pytest.raises(AssertionError, match="lists no ONNX nodes") as info:
        assert_fused(record, "a", "b")
    assert not isinstance(info.value, UnknownNodeError) and "ProfilingVerbosity.DETAILED" in str(info.value)


def test_two_nodes_needed(rtx17: BuildRecord) -> None:
    with pytest.raises(TypeError):
        assert_fused(rtx17, "conv1")


@pytest.mark.parametrize("alias", ["fp16", "half", "Half", "FP16", "float16"])
def test_precision_aliases(trt86: BuildRecord, alias: str) -> None:
    assert_precision(trt86, "Conv-1", alias)


def test_precision_failure_text(trt86: BuildRecord) -> None:
    with pytest.raises(AssertionError) as info:
        assert_precision(trt86, "Softmax-14", "fp16", label="mnist")
    text = str(info.value)
    assert "mnist: expected 'Softmax-14' in Half, but 1 of 1 layer(s) differ" in text
    assert "Softmax-14 + ArgMax-15" in text and "precision=Float" in text and "tactic=0x00000000000003e9" in text
    with pytest.raises(ValueError, match="unknown dtype"):
        assert_precision(trt86, "Conv-1", "fp99")


def test_precision_int8_from_layer_json(corpus: Path) -> None:
    record = read_layer_json(corpus / "layers_trt8.2_trex_mobilenet_qat_int8.graph.json")
    assert_precision(record, "Conv_12", "int8")
    assert_precision(record, "Clip_16", "INT8")


def test_layer_count(trt86: BuildRecord) -> None:
    assert_layer_count(trt86, min=15, max=15)
    assert_layer_count(trt86, max=20)
    with pytest.raises(AssertionError) as info:
        assert_layer_count(trt86, max=10, label="mnist")
    text = str(info.value)
    assert "mnist: expected <= 10 engine layers, got 15 (9 compute, 5 reformat, 1 helper)" in text
    assert "Reformatting CopyNode for Input Tensor 0 to Conv-1 + ReLU-2" in text
    assert "... and 7 more layers (not shown)" in text
    with pytest.raises(AssertionError, match="expected >= 16 engine layers, got 15"):
        assert_layer_count(trt86, min=16)


def test_warnings(trt86: BuildRecord) -> None:
    assert_warning(trt86, "generated with INT64 weights")
    assert_warning(trt86, "re:subnormal FP16 values")
    assert_no_warning(trt86, "insufficient memory")
    with pytest.raises(AssertionError) as info:
        assert_no_warning(trt86, "re:INT64", label="mnist")
    assert "mnist: expected no builder warning matching 're:INT64', found 1:" in str(info.value)
    assert "onnx2trt_utils.cpp" in str(info.value)
    with pytest.raises(AssertionError) as info:
        assert_warning(trt86, "calibration", label="mnist")
    text = str(info.value)
    assert "mnist: expected a builder warning matching 'calibration'; the build logged" in text
    assert "Your ONNX model has been generated with INT64 weights" in text


def test_tracebackhide_is_set() -> None:
    import inspect

    from pytest_trt.buildlog import assertions

    for fn in (assert_fused, assert_no_fusion, assert_precision, assert_layer_count, assert_warning,
               assert_no_warning, assertions.resolve_nodes):
        assert "__tracebackhide__ = True" in inspect.getsource(fn), fn.__name__
