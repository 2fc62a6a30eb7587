"""torchvision graphs committed without weights (tests/data/models), refilled with seeded random values.

The graphs come from ``scripts/export_torchvision_graphs.py`` (run by hand where torch is
installed); the suite itself never imports torch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DATA = Path(__file__).parent / "data" / "models"
ARCHITECTURES = ("resnet18", "efficientnet_b0", "mobilenet_v3_small", "convnext_tiny", "regnet_y_400mf", "vit_b_16")


def _is_stripped(t: onnx.TensorProto) -> bool:
    return (
        t.data_type == onnx.TensorProto.FLOAT
        and not t.raw_data
        and not t.float_data
        and not t.external_data
        and int(np.prod(t.dims)) > 0
    )


def refilled(name: str, *, seed: int = 0) -> onnx.ModelProto:
    """Architecture ``name`` with every stripped float initializer filled (scaled normal, fixed seed)."""
    model = onnx.load(str(DATA / f"{name}.onnx"))
    rng = np.random.default_rng(seed)
    for i, t in enumerate(model.graph.initializer):
        if not _is_stripped(t):
            continue
        dims = tuple(int(d) for d in t.dims)
        fan_in = int(np.prod(dims[1:])) if len(dims) > 1 else max(dims[0], 1)
        arr = (rng.standard_normal(dims) * np.sqrt(1.0 / fan_in)).astype(np.float32)
        model.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr, t.name))
    return model


def write_refilled(name: str, folder: Path, *, seed: int = 0) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(refilled(name, seed=seed), str(path))
    return path


def conv_bn_relu(path: Path, *, scale: float = 1.0, seed: int = 3) -> Path:
    """x (N, 3, 8, 8) -> Conv -> BatchNormalization -> Relu -> Flatten -> ``features`` (N, 144).

    ONNX Runtime's optimized session folds the BatchNormalization into the Conv, its reference does not: the two
    differ by float rounding, the noise a golden's thresholds should sit above.
    """
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((4, 3, 3, 3)) * scale).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    beta = rng.standard_normal(4).astype(np.float32)
    mean = rng.standard_normal(4).astype(np.float32)
    var = rng.uniform(0.1, 2.0, 4).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (gamma, "gamma"), (beta, "beta"),
                                                          (mean, "mean"), (var, "var"))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["features"], name="flatten")]
    graph = helper.make_graph(nodes, "conv_bn_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 144])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path
