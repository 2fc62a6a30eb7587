"""Engines for the golden tests: real ONNX Runtime builds, and an adapter for what a build cannot vary.

:func:`real_engine` builds through the product's ONNX Runtime backend.
:class:`OrtEngine` wraps a real session but lets a test set what one machine
cannot produce by building: another backend version or device, or another
fusion (``FUSED``), for the provenance and structure tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from pytest_trt.artifact import BuildResult
from pytest_trt.backends.base import TensorSpec
from pytest_trt.buildlog.record import BuildRecord, Layer
from pytest_trt.config import BuildConfig
from pytest_trt.testing import write_classifier

FEATURES, CLASSES = 8, 5

SEPARATE = (
    Layer("conv_dw", "Convolution", origins=("conv_dw",), precision="Int8", tactic="0x11"),
    Layer("relu6", "Activation", origins=("relu6",), precision="Int8", tactic="0x22"),
    Layer("fc", "Gemm", origins=("fc",), precision="Float", tactic="0x33"),
)
FUSED = (
    Layer("conv_dw + relu6", "CaskConvolution", origins=("conv_dw", "relu6"), precision="Int8", tactic="0x99"),
    Layer("fc", "Gemm", origins=("fc",), precision="Float", tactic="0x44"),
)


def write_model(path: Path, *, seed: int = 0, scale: float = 1.0) -> Path:
    """x (N, 8) float32 -> logits (N, 5) = relu(x @ W1) @ W2 * scale, plus an ArgMax output; nodes named as SEPARATE."""
    return write_classifier(path, features=FEATURES, classes=CLASSES, seed=seed, scale=scale,
                            names=("conv_dw", "relu6", "fc"))


class OrtEngine:
    """An ONNX Runtime session wrapped in the engine protocol; run() splits batches over the profile max."""

    def __init__(self, config: BuildConfig, *, layers: tuple[Layer, ...] = SEPARATE,
                 backend_version: str | None = None, device: str = "test-cpu") -> None:
        self.config = config
        self.session = ort.InferenceSession(str(config.onnx), providers=["CPUExecutionProvider"])
        self.result = BuildResult(
            backend="onnxruntime", engine=b"", log=(), config=config.to_json(), effective_config={},
            config_hash=config.config_hash, onnx_sha256=config.onnx_sha256, durations={},
            versions={"onnxruntime": backend_version or ort.__version__}, device={"kind": "cpu", "name": device},
            backend_version=backend_version or ort.__version__,
        )
        self.record = BuildRecord(source="onnxruntime", layers=layers, timings={"build_s": 0.1},
                                  backend="onnxruntime", backend_version=self.result.backend_version)
        self.label = f"{config.name} (onnxruntime)"
        self.backend_name = "onnxruntime"
        self.calls: list[int] = []

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        types = {"tensor(float)": "float32", "tensor(int64)": "int64"}
        return tuple(TensorSpec(i.name, types[i.type], tuple(d if isinstance(d, int) else -1 for d in i.shape))
                     for i in self.session.get_inputs())

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls.append(next(iter(feeds.values())).shape[0])
        names = [o.name for o in self.session.get_outputs()]
        return dict(zip(names, self.session.run(names, feeds), strict=True))


class OutputsOnly(OrtEngine):
    """Drops an output, to test a golden that holds more outputs than the engine gives."""

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().run(feeds)
        out.pop("pred")
        return out


def real_engine(config: BuildConfig) -> object:
    """A real ONNX Runtime build through the product's backend: a ``pytest_trt.engines.engine.Engine``."""
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.engines.engine import Engine

    backend = OrtBackend()
    return Engine(config, backend.build_config(config), backend)


def write_topk_model(path: Path, *, classes: int = 4, damp: float = 1.0) -> Path:
    """x (N, C) -> logits = x @ diag(damp, 1, ..., 1): ``damp < 1`` lowers class 0's score only."""
    w = np.eye(classes, dtype=np.float32)
    w[0, 0] = damp
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["logits"], name="fc")], "topk",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", classes])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path


def reseal(path: Path) -> None:
    """After a test edits a golden file by hand: record its new bytes as approved (its ``.sha256`` sidecar),
    so the check goes on to what the edit is about (a hand edit that also rewrites the sidecar)."""
    from pytest_trt.common.filehash import sha256_file
    from pytest_trt.golden.digest_file import write_sidecar

    write_sidecar(path, [sha256_file(path)])
