"""Regenerate tests/data/models/*.onnx: torchvision architectures as ONNX graphs without weights.

Run in a separate environment that has torch and torchvision (the test suite never needs them):

    python -m venv /tmp/torch && /tmp/torch/bin/pip install torch torchvision onnx
    /tmp/torch/bin/python scripts/export_torchvision_graphs.py tests/data/models

Each model is built with random weights (``weights=None``), exported in eval mode with
the TorchScript exporter (readable node names such as ``/features/features.0/Conv``),
and then every float initializer with more than ``KEEP_ELEMENTS`` elements loses its
data (shape and type stay).  Small initializers are kept: ONNX Runtime's fusions match
on constants (Gelu's sqrt(2), LayerNorm's epsilon, HardSigmoid's slope).  At test time
``tests/ort_models.py`` refills the stripped tensors with seeded random values.
"""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import torch
import torchvision

KEEP_ELEMENTS = 64
OPSET = 17
#: name -> (constructor keyword arguments, input height/width).  vit_b_16 takes a 32x32 input
#: (image_size=32: 4 patches), which keeps its graph and activations small; weights are full size.
MODELS: dict[str, tuple[dict[str, object], int]] = {
    "resnet18": ({}, 64),
    "efficientnet_b0": ({}, 64),
    "mobilenet_v3_small": ({}, 64),
    "convnext_tiny": ({}, 64),
    "regnet_y_400mf": ({}, 64),
    "vit_b_16": ({"image_size": 32}, 32),
}


def strip(model: onnx.ModelProto) -> onnx.ModelProto:
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type == onnx.TensorProto.FLOAT and n > KEEP_ELEMENTS:
            t.ClearField("raw_data")
            t.ClearField("float_data")
    return model


def export(name: str, out_dir: Path) -> Path:
    kwargs, size = MODELS[name]
    torch.manual_seed(0)
    net = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    path = out_dir / f"{name}.onnx"
    torch.onnx.export(
        net, (torch.randn(1, 3, size, size),), str(path), input_names=["input"], output_names=["logits"],
        opset_version=OPSET, dynamo=False, do_constant_folding=True,
    )
    model = strip(onnx.load(str(path)))
    model.ir_version = 8
    model.producer_name = f"torchvision {torchvision.__version__} via scripts/export_torchvision_graphs.py"
    onnx.save(model, str(path))
    return path


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1] if len(argv) > 1 else "tests/data/models")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[2:] or MODELS:
        path = export(name, out_dir)
        print(f"{path}: {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
