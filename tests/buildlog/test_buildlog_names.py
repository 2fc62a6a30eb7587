"""Layer-name normalization: every rule of pytest_trt.buildlog.names with a name from a real log."""

from __future__ import annotations

import pytest

from examples.models import mobilenet_v2
from pytest_trt.buildlog.names import OnnxIndex, foreign_range, is_helper, origins_from_name, split_name


@pytest.mark.parametrize(
    ("name", "members"),
    [
        ("Conv__27 + Relu_1", ["Conv__27", "Relu_1"]),  # 8.0.3
        ("Conv_3 + Relu_4 || Conv_0 + Relu_1", ["Conv_3", "Relu_4", "Conv_0", "Relu_1"]),  # 7.1.3 merge
        ("PWN(247 + (Unnamed Layer* 11) [Shuffle], Add_49)", ["247", "(Unnamed Layer* 11) [Shuffle]", "Add_49"]),  # 8.6.1
        ("PWN(PWN(a, PWN(b, c)), d)", ["a", "b", "c", "d"]),
        ("features.0.0.weight + QuantizeLinear_8 + Conv_12 + PWN(Clip_16)",
         ["features.0.0.weight", "QuantizeLinear_8", "Conv_12", "Clip_16"]),  # 8.2 TREx
        ("{ForeignNode[node_conv2d...node_relu]}", ["node_conv2d", "node_relu"]),  # 10.16.1
        ("{ForeignNode[node_linear]}", ["node_linear"]),  # 10.14.1
        ("{ForeignNode[318...Transpose_2125 + Flatten_2127 + (Unnamed Layer* 4178) [Shuffle]]}",  # 8.2.1 swin
         ["318", "Transpose_2125", "Flatten_2127", "(Unnamed Layer* 4178) [Shuffle]"]),
        ("(Unnamed Layer* 52) [Shuffle]", ["(Unnamed Layer* 52) [Shuffle]"]),  # brackets are not separators
        ("PWN(a) + PWN(b)", ["a", "b"]),  # two PWNs, not one wrapping "a) + PWN(b"
        ("", []),
    ],
)
def test_split_name(name: str, members: list[str]) -> None:
    assert split_name(name) == members


@pytest.mark.parametrize(
    ("name", "origins"),
    [
        ("Conv-1 + ReLU-2", ("Conv-1", "ReLU-2")),
        ("Reformatting CopyNode for Input Tensor 0 to Conv-1 + ReLU-2", ()),  # 8.6.0: the reformat, not the conv
        ("MatMul + b3/read:0 + (Unnamed Layer* 21) [Shuffle] + unsqueeze_node_after_b3/read:0 + "
         "(Unnamed Layer* 21) [Shuffle]_(Unnamed Layer* 21) [Shuffle]_output + add_2 + Relu_2",
         ("MatMul", "b3/read:0", "add_2", "Relu_2")),  # 8.2.3
        ("__myl_Move_myl0_1", ()),  # TensorRT-RTX helper kernel
        ("/classifier/classifier_6/Gemm_myl9_4", ("/classifier/classifier_6/Gemm",)),  # 10.4 kernel suffix
        ("[trainStation1]", ()),  # 8.5.2
        ("gemm1.bias + ONNXTRT_Broadcast", ("gemm1.bias",)),  # 10.14.1: the parser's broadcast shuffle
        ("a + a", ("a",)),
    ],
)
def test_origins_from_name_drops_helpers(name: str, origins: tuple[str, ...]) -> None:
    assert origins_from_name(name) == origins


def test_keep_helpers_when_asked() -> None:
    assert origins_from_name("247 + (Unnamed Layer* 11) [Shuffle]", keep_helpers=True) == (
        "247", "(Unnamed Layer* 11) [Shuffle]")


def test_helper_names() -> None:
    assert is_helper("Reformatting CopyNode for Output Tensor 0 to Conv-4")
    assert is_helper("__mye1040_0_myl0_0")
    assert not is_helper("block1/conv_dw")


def test_foreign_range() -> None:
    assert foreign_range("{ForeignNode[gemm2.bias + ONNXTRT_Broadcast_4...ONNXTRT_castHelper_9]}") == (
        "gemm2.bias + ONNXTRT_Broadcast_4", "ONNXTRT_castHelper_9")
    assert foreign_range("Conv_0") is None


def test_foreign_node_resolves_through_onnx_model() -> None:
    index = OnnxIndex.load(mobilenet_v2())
    got = origins_from_name("{ForeignNode[block1/conv_dw...block1/add]}", onnx=index)
    assert got == ("block1/conv_dw", "block1/bn_dw", "block1/relu6", "block1/conv_project", "block1/bn_project",
                   "block1/add")
    # with the model at hand, names that are not ONNX nodes are dropped, helpers or not
    assert origins_from_name("block1/conv_dw + castHelper + not_a_node", onnx=index) == ("block1/conv_dw",)


def test_foreign_node_range_ends_may_be_fused_names() -> None:
    index = OnnxIndex(["a", "b", "c", "d", "e"])
    assert index.between("x + b", "d + (Unnamed Layer* 3) [Shuffle]") == ("b", "c", "d")
    assert index.between("d", "b") == ()  # reversed: not a range of this graph
    assert index.between("zz", "b") == ()


def test_onnx_index_from_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from examples.models import save

    path = save(mobilenet_v2(), tmp_path / "m.onnx")
    index = OnnxIndex.load(path)
    assert index.names[:3] == ("conv1", "bn1", "relu1") and "classifier" in index
