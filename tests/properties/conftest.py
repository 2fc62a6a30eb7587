"""Engines for the property-based and performance tests: real ONNX Runtime builds of small models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trt import BuildConfig, OrtOptions, Profile
from tests.conftest import HAS_ORT

pytest.importorskip("hypothesis")
if not HAS_ORT:
    pytest.skip("onnxruntime is not installed (pip install 'pytest-trt[ort]')", allow_module_level=True)


def mixed_dtypes_model() -> onnx.ModelProto:
    """Four inputs of four dtypes with dynamic dims, each passed through (Identity), plus 2*x."""
    ins = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "H", 4]),
        helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["N", 3]),
        helper.make_tensor_value_info("i", TensorProto.INT32, ["N"]),
        helper.make_tensor_value_info("b", TensorProto.BOOL, ["N"]),
    ]
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [helper.make_node("Mul", ["x", "two"], ["x2"], name="double")]
    nodes += [helper.make_node("Identity", [n], [f"{n}_out"], name=f"id_{n}") for n in ("h", "i", "b")]
    outs = [helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["N", "H", 4])]
    outs += [helper.make_tensor_value_info(f"{n}_out", t, s) for n, t, s in
             (("h", TensorProto.FLOAT16, ["N", 3]), ("i", TensorProto.INT32, ["N"]), ("b", TensorProto.BOOL, ["N"]))]
    graph = helper.make_graph(nodes, "mixed", ins, outs, [two])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def ort_engine(config: BuildConfig):
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.engines.engine import Engine

    backend = OrtBackend()
    return Engine(config, backend.build_config(config), backend)


@pytest.fixture(scope="session")
def mixed_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mixed") / "mixed.onnx"
    onnx.save(mixed_dtypes_model(), str(path))
    return path


@pytest.fixture(scope="session")
def mixed_engine(mixed_onnx: Path):
    profiles = (Profile(x=((1, 1, 4), (4, 5, 4), (8, 9, 4)), h=((1, 3), (4, 3), (8, 3)), i=((1,), (4,), (8,)),
                        b=((1,), (4,), (8,))),
                Profile(x=((9, 2, 4), (10, 2, 4), (12, 6, 4)), h=((9, 3), (10, 3), (12, 3)), i=((9,), (10,), (12,)),
                        b=((9,), (10,), (12,))))
    return ort_engine(BuildConfig(name="mixed", onnx=mixed_onnx, profiles=profiles))


MNV2_PROFILE = Profile(input=((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)))


@pytest.fixture(scope="session")
def mnv2_engine(models):
    return ort_engine(BuildConfig(name="mnv2_ort", onnx=models["mobilenet_v2"], profiles=[MNV2_PROFILE],
                                  ort=OrtOptions(graph_optimization_level="extended")))


@pytest.fixture(scope="session")
def planted_engine(models):
    """The planted bug: an engine built from the ReLU6-stem copy; its reference is the correct model."""
    return ort_engine(BuildConfig(name="mnv2_planted", onnx=models["mobilenet_v2_planted"], profiles=[MNV2_PROFILE],
                                  ort=OrtOptions(graph_optimization_level="extended")))


def rng_images(n: int, high: float = 1.0, seed: int = 0) -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(seed).uniform(0, high, (n, 3, 32, 32)).astype(np.float32)}
