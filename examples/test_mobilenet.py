"""What a user writes: pinned builds of a MobileNetV2-style model, and assertions on what TensorRT did.

Run with ``pytest --trt-engine-build examples/`` (TensorRT-RTX builds these on
a CPU-only machine).  Without ``--trt-engine-build`` the tests use cached
engines and skip when none is cached.
"""

from __future__ import annotations

import pytest

from examples.conftest import MODELS
from pytest_trt import BuildConfig, Profile, assert_fused, assert_no_fusion

MNV2_DYNAMIC = BuildConfig(
    name="mobilenet_v2",
    version="1.0.0",
    onnx=MODELS["mobilenet_v2"],
    precision="fp32",
    profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32)))],
    builder_optimization_level=3,
    memory_pool_limits={"workspace": "1GiB"},
)

MNV2_FIXED = BuildConfig(name="mobilenet_v2_b1", version="1.0.0", onnx=MODELS["mobilenet_v2_b1"])


@pytest.fixture(autouse=True)
def _tensorrt_family_only(trt_backend):
    # builder_optimization_level and memory pools are TensorRT settings: ONNX Runtime refuses them
    if trt_backend.name == "onnxruntime":
        pytest.skip("this example pins TensorRT builder settings; see test_onnxruntime.py for ONNX Runtime")


@pytest.mark.trt(MNV2_DYNAMIC)
def test_dynamic_batch_engine_fuses_depthwise_conv_with_relu6(trt_engine):
    # The incident: an upgrade fused conv_dw with ReLU6. Here the fusion is expected, and pinned.
    assert_fused("block1/conv_dw", "block1/bn_dw", "block1/relu6")
    trt_engine.assert_fused("conv1", "bn1", "relu1")
    with pytest.raises(AssertionError, match="block1/conv_dw"):
        assert_no_fusion("block1/conv_dw", "block1/relu6")


@pytest.mark.trt(MNV2_DYNAMIC)
def test_effective_config_is_the_pin(trt_engine):
    eff = trt_engine.result.effective_config
    assert eff["builder_optimization_level"] == 3
    assert eff["memory_pool_limits"] == {"workspace": 1 << 30}
    assert eff["profiles"] == [{"input": [[1, 3, 32, 32], [8, 3, 32, 32], [32, 3, 32, 32]]}]
    assert "TF32" not in eff["flags"]  # precision="fp32" pins strict FP32


@pytest.mark.trt(MNV2_FIXED)
def test_fixed_batch_engine_log_names_every_onnx_layer(trt_engine):
    log = trt_engine.result.log_text()
    for node in ("conv1", "block1/conv_dw", "block5/conv_project", "classifier"):
        assert f"[ONNX Layer: {node}]" in log
    assert trt_engine.record.layers, "the DETAILED layer listing was parsed"


def test_factory_builds_a_variant(trt_build):
    engine = trt_build(MNV2_DYNAMIC.replace(name="mobilenet_v2_o1", builder_optimization_level=1))
    assert engine.result.effective_config["builder_optimization_level"] == 1
    assert_fused("block2/conv_dw", "block2/relu6", engine=engine)
