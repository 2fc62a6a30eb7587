"""TensorRT part of the upgrade suite: the Q/DQ INT8 MobileNetV2 (TensorRT-RTX 1.4 fails to build it).

    pytest --trt-backend tensorrt-rtx --trt-engine-build --trt-bundle-dir upgrade-runs/rtx14 examples/
"""

from __future__ import annotations

import pytest

from examples.upgrade.conftest import QDQ
from pytest_trt import BuildConfig

MNV2_QDQ = BuildConfig(name="mobilenet_v2_qdq", version="1.0.0", onnx=QDQ)


@pytest.fixture(autouse=True)
def _tensorrt_family_only(trt_backend):
    if trt_backend.name == "onnxruntime":
        pytest.skip("a TensorRT build; test_upgrade_ort.py runs the Q/DQ model on ONNX Runtime")


@pytest.mark.trt(MNV2_QDQ)
def test_qdq_int8_engine_builds(trt_engine):
    assert trt_engine.record.layers
