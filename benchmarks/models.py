"""A torchvision-size MobileNetV2 (width 1.0, 224x224, 1000 classes, ~3.5 M parameters) for the benchmarks.

Made with ``onnx.helper`` and a fixed seed, without torch: the standard
MobileNetV2 layout (stem conv 3->32 stride 2, the 17 inverted residual blocks
of the paper's table 2, 1x1 conv to 1280, global average pool, 1000-way Gemm),
with BatchNormalization and ReLU6 (Clip) as the torchvision export has them.
``python benchmarks/models.py OUT.onnx`` writes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from examples.models import OPSET, _Graph, save

#: (expansion t, output channels c, repeats n, first stride s), MobileNetV2 table 2
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet_v2_224(*, batch: int | str = "N", seed: int = 0, num_classes: int = 1000) -> onnx.ModelProto:
    g = _Graph(seed)
    x = g.relu6("stem/relu6", g.bn("stem/bn", g.conv("stem/conv", "input", 3, 32, 3, stride=2), 32))
    cin, index = 32, 0
    for t, cout, n, s in SETTINGS:
        for r in range(n):
            index += 1
            x, cin = g.inverted_residual(f"block{index}", x, cin, t, cout, s if r == 0 else 1), cout
    x = g.relu6("head/relu6", g.bn("head/bn", g.conv("head/conv", x, cin, 1280, 1), 1280))
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool:out"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool:out"], ["flatten:out"], name="flatten", axis=1))
    w = g.weight("classifier.weight", (num_classes, 1280), scale=0.01)
    b = g.const("classifier.bias", np.zeros(num_classes, dtype=np.float32))
    g.nodes.append(helper.make_node("Gemm", ["flatten:out", w, b], ["logits"], name="classifier", transB=1))
    graph = helper.make_graph(
        g.nodes, "mobilenet_v2_224",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, num_classes])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-trt-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def parameters(model: onnx.ModelProto) -> int:
    """Trainable parameters (conv/Gemm weights, BN scale and bias), as torchvision counts them."""
    skip = (".mean", ".var", ".min", ".max")
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer if not t.name.endswith(skip))


def write(path: str | Path, **kwargs: object) -> Path:
    return save(mobilenet_v2_224(**kwargs), path)  # type: ignore[arg-type]


if __name__ == "__main__":
    m = mobilenet_v2_224()
    print(f"{parameters(m):,} parameters, {len(m.graph.node)} nodes")
    if len(sys.argv) > 1:
        print(save(m, sys.argv[1]))
