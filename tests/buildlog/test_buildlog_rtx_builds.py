"""Real TensorRT-RTX builds (CPU, ahead of time) of small example models, parsed and asserted on.

What is asserted is what TensorRT-RTX 1.7.1 really does at Myelin-kernel granularity:
the stem Conv+BN+ReLU becomes one kernel only when a convolution follows it (MobileNetV2
stem, 3->16 channels); in the stand-alone conv_bn_relu model conv1 stays alone and
bn1+relu1 fuse.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from examples.models import conv_bn_relu, mobilenet_v2
from pytest_trt.buildlog import (
    BuildRecord,
    UnknownNodeError,
    assert_fused,
    assert_no_fusion,
    assert_precision,
    diff_records,
)

Build = Callable[..., BuildRecord]
GENERATOR_DIR = Path(__file__).resolve().parents[1] / "data" / "trt_logs"  # generate_rtx_logs.py
STEM_ONLY = ((1, 16, 1),)  # the stem plus one inverted-residual block: the smallest model where the stem fuses


def test_conv_bn_relu_is_one_layer_with_three_origins(rtx_build: Build) -> None:
    record = rtx_build(mobilenet_v2(batch=1, size=16, blocks=STEM_ONLY), (1, 3, 16, 16))
    (stem,) = [layer for layer in record.layers if "conv1" in layer.origins]
    assert stem.origins == ("conv1", "bn1", "relu1") and stem.is_fusion and stem.kind == "compute"
    (subgraph,) = record.subgraphs  # named after its first and last layers: {ForeignNode[classifier.bias...classifier_1]}
    assert stem.precision == "Float" and stem.subgraph == subgraph.name and "relu1" in subgraph.origins
    assert_fused(record, "conv1", "bn1", "relu1")
    assert record.unparsed_lines == 0 and record.origins_exact


def test_standalone_conv_bn_relu_keeps_conv_alone(rtx_build: Build) -> None:
    trt = pytest.importorskip("tensorrt_rtx")
    if not trt.__version__.startswith("1.7."):
        pytest.skip(f"kernel split measured on TensorRT-RTX 1.7, this is {trt.__version__}")
    record = rtx_build(conv_bn_relu(batch=1, channels=16, size=16), (1, 3, 16, 16))
    assert [layer.origins for layer in record.layers if layer.kind == "compute"] == [("conv1",), ("bn1", "relu1")]
    assert_fused(record, "bn1", "relu1")
    assert_no_fusion(record, "conv1", "relu1")


def test_mobilenet_v2_depthwise_relu6_fusion(rtx_build: Build) -> None:
    record = rtx_build(mobilenet_v2(), (8, 3, 32, 32))
    for block in range(1, 6):
        assert_fused(record, f"block{block}/conv_dw", f"block{block}/relu6")
    with pytest.raises(AssertionError) as info:
        assert_no_fusion(record, "block1/conv_dw", "block1/relu6", label="mnv2-rtx")
    text = str(info.value)
    assert "mnv2-rtx: expected 'block1/conv_dw', 'block1/relu6' NOT to be fused" in text
    assert "origins=['block1/conv_dw', 'block1/bn_dw', 'block1/relu6']" in text and "runtime_fusion" in text
    with pytest.raises(AssertionError, match="no layer holds all of them") as unrelated:
        assert_fused(record, "conv1", "classifier")
    assert not isinstance(unrelated.value, UnknownNodeError)
    assert_precision(record, "block*/conv_dw", "fp32")


def test_onnx_model_given_expands_the_foreign_node(rtx_build: Build) -> None:
    model = mobilenet_v2(batch=1, size=16, blocks=STEM_ONLY)
    record = rtx_build(model, (1, 3, 16, 16), onnx=model)
    (sg,) = record.subgraphs
    assert sg.origins[0] == "conv1" and sg.origins[-1] == "classifier"
    assert "flatten" in record.all_origins()  # the subgraph holds nodes no kernel names


def test_live_build_matches_committed_log(corpus, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The committed 1.7.1 log is what this TensorRT-RTX builds today (regenerate it when this fails).

    Built in a fresh process, as generate_rtx_logs.py builds it: an earlier build in the same process changes the
    peak GPU memory TensorRT-RTX reports.
    """
    trt = pytest.importorskip("tensorrt_rtx")
    from pytest_trt.buildlog import read_log

    name = f"log_rtx{'.'.join(trt.__version__.split('.')[:3])}_mobilenet_v2_detailed.txt"
    if not (corpus / name).exists():
        pytest.skip(f"no committed log {name}")
    out = tmp_path / "live.log"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from generate_rtx_logs import _Capture, build_log; "
            "open(sys.argv[2], 'w', encoding='utf-8').write(build_log(_Capture()))")
    subprocess.run([sys.executable, "-c", code, str(GENERATOR_DIR), str(out)], check=True, timeout=300)
    assert diff_records(read_log(corpus / name), read_log(out)).is_empty
