"""Outputs whose shape depends on the data (NonZero) through the runner's IOutputAllocator: full TensorRT on a GPU.

TensorRT-RTX 1.7 cannot parse NonZero (no plugin creator), so this needs
NVIDIA TensorRT, which cannot be installed here: it skips with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trt import BuildConfig, Profile
from tests.conftest import HAS_TRT


def _trt_gpu_reason() -> str | None:
    # NonZero needs full TensorRT: TensorRT-RTX 1.7 has no NonZero plugin creator (its parser says so)
    if not HAS_TRT:
        return "full TensorRT (module tensorrt) is not installed; TensorRT-RTX cannot parse NonZero"
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return TensorRTBackend("tensorrt").not_runnable_reason()


pytestmark = pytest.mark.skipif(_trt_gpu_reason() is not None, reason=f"cannot run full TensorRT engines here: {_trt_gpu_reason()}")


def test_data_dependent_output_goes_through_the_output_allocator(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    from pytest_trt.backends.tensorrt import TensorRTBackend
    from pytest_trt.engines.engine import Engine

    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["idx"], name="nz")], "nz",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("idx", TensorProto.INT64, [2, "K"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "nz.onnx"))
    backend = TensorRTBackend("tensorrt")
    config = BuildConfig(name="nz", onnx=tmp_path / "nz.onnx", profiles=[Profile(x=((1, 8), (4, 8), (8, 8)))])
    engine = Engine(config, backend.build_config(config), backend)
    x = np.zeros((3, 8), np.float32)
    x[0, 1] = x[2, 7] = 1.0
    got = engine.runner.run({"x": x})["idx"]
    np.testing.assert_array_equal(got, np.array(np.nonzero(x)))  # shape (2, 2): known only after execution
