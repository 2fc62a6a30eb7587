"""A TensorRT-RTX engine run on a GPU it supports, against the plain ONNX semantics (ONNX Runtime).

Skips where it cannot run: CPU-only machines, and GPUs TensorRT-RTX refuses
(the Hopper H200 lent to this project is compute capability 9.0).
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trt import BuildConfig, Profile
from tests.conftest import HAS_ORT, HAS_RTX


def _reason() -> str | None:
    if not HAS_RTX:
        return "tensorrt_rtx is not installed"
    if not HAS_ORT:
        return "onnxruntime (the reference) is not installed"
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return TensorRTBackend("tensorrt_rtx").not_runnable_reason()


pytestmark = pytest.mark.skipif(_reason() is not None, reason=f"cannot run TensorRT-RTX engines here: {_reason()}")


def test_rtx_engine_matches_the_onnx_reference(models):
    from pytest_trt.backends.tensorrt import TensorRTBackend
    from pytest_trt.engines.engine import Engine

    backend = TensorRTBackend("tensorrt_rtx")
    config = BuildConfig(name="mnv2", onnx=models["mobilenet_v2"],
                         profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (16, 3, 32, 32)))])
    engine = Engine(config, backend.build_config(config), backend)
    x = {"input": np.random.default_rng(0).random((20, 3, 32, 32), dtype=np.float32)}  # 20 > max 16: split
    got = engine.run(x)["logits"]
    want = engine.reference().run(x)["logits"]
    assert got.shape == (20, 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("binding", ["pycuda", "cuda-python"])
def test_rtx_engine_with_two_profiles_picks_the_one_that_fits(models, binding, monkeypatch):
    import importlib.util

    from pytest_trt.backends.tensorrt import TensorRTBackend
    from pytest_trt.engines.engine import Engine

    if importlib.util.find_spec("pycuda" if binding == "pycuda" else "cuda") is None:
        pytest.skip(f"{binding} is not installed")
    monkeypatch.setenv("PYTEST_TRT_CUDA", binding)
    backend = TensorRTBackend("tensorrt_rtx")
    config = BuildConfig(name="cbr2", onnx=models["conv_bn_relu"],
                         profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16))),
                                   Profile(input=((5, 3, 16, 16), (8, 3, 16, 16), (12, 3, 16, 16)))])
    engine = Engine(config, backend.build_config(config), backend)
    assert [p for p in engine.runner.profiles] == [
        {"input": ((1, 3, 16, 16), (4, 3, 16, 16))}, {"input": ((5, 3, 16, 16), (12, 3, 16, 16))}]
    rng = np.random.default_rng(1)
    for batch, profile in ((3, 0), (10, 1), (1, 0), (12, 1)):
        x = {"input": rng.random((batch, 3, 16, 16), dtype=np.float32)}
        engine.assert_matches_reference(x, rtol=1e-3, atol=1e-3)
        assert engine.runner.profile == profile
    timing = engine.benchmark({"input": rng.random((8, 3, 16, 16), dtype=np.float32)}, warmup=2, iterations=10)
    assert timing.clock == "cuda-events" and timing.cpu_rounds == ()

