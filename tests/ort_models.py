"""torchvision graphs committed without weights (tests/data/models), refilled with seeded random values.

The graphs come from ``scripts/export_torchvision_graphs.py`` (run by hand where torch is
installed); the suite itself never imports torch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

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
