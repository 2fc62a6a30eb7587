"""Generators of the example ONNX models, made with ``onnx.helper`` and a fixed seed.

Nothing binary is committed: the models are written on demand (``python -m
examples.models OUTDIR``, or by ``examples/conftest.py`` at collection).

``mobilenet_v2`` is a small MobileNetV2-style classifier: a stem
conv + BN + ReLU, inverted residual blocks (1x1 expand conv + BN + ReLU6,
3x3 depthwise conv + BN + ReLU6 (Clip 0..6), 1x1 project conv + BN, residual
Add where shapes allow), global average pool and a Gemm classifier.  Node
names follow the ``block<N>/conv_dw``, ``block<N>/relu6`` pattern so fusion
assertions can name them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def weight(self, name: str, shape: tuple[int, ...], scale: float = 0.1) -> str:
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def const(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def conv(self, name: str, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        fan_in = (cin // group) * k * k
        w = self.weight(f"{name}.weight", (cout, cin // group, k, k), scale=float(np.sqrt(2.0 / fan_in)))
        out = f"{name}:out"
        pad = k // 2
        self.nodes.append(
            helper.make_node(
                "Conv",
                [x, w],
                [out],
                name=name,
                kernel_shape=[k, k],
                strides=[stride, stride],
                pads=[pad, pad, pad, pad],
                group=group,
            )
        )
        return out

    def bn(self, name: str, x: str, c: int) -> str:
        scale = self.const(f"{name}.scale", (1.0 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        bias = self.const(f"{name}.bias", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        mean = self.const(f"{name}.mean", (0.1 * self.rng.standard_normal(c)).astype(np.float32))
        var = self.const(f"{name}.var", (1.0 + 0.1 * np.abs(self.rng.standard_normal(c))).astype(np.float32))
        out = f"{name}:out"
        self.nodes.append(
            helper.make_node("BatchNormalization", [x, scale, bias, mean, var], [out], name=name, epsilon=1e-5)
        )
        return out

    def relu(self, name: str, x: str) -> str:
        out = f"{name}:out"
        self.nodes.append(helper.make_node("Relu", [x], [out], name=name))
        return out

    def relu6(self, name: str, x: str) -> str:
        lo = self.const(f"{name}.min", np.array(0.0, dtype=np.float32))
        hi = self.const(f"{name}.max", np.array(6.0, dtype=np.float32))
        out = f"{name}:out"
        self.nodes.append(helper.make_node("Clip", [x, lo, hi], [out], name=name))
        return out


    def inverted_residual(self, p: str, x: str, cin: int, t: int, cout: int, stride: int) -> str:
        """MobileNetV2's block: 1x1 expand (when t != 1), 3x3 depthwise, 1x1 project, residual add when shapes allow."""
        hidden = cin * t
        y = x
        if t != 1:
            y = self.relu6(
                f"{p}/relu6_expand", self.bn(f"{p}/bn_expand", self.conv(f"{p}/conv_expand", y, cin, hidden, 1), hidden)
            )
        y = self.relu6(
            f"{p}/relu6",
            self.bn(f"{p}/bn_dw", self.conv(f"{p}/conv_dw", y, hidden, hidden, 3, stride, group=hidden), hidden),
        )
        y = self.bn(f"{p}/bn_project", self.conv(f"{p}/conv_project", y, hidden, cout, 1), cout)
        if stride == 1 and cin == cout:
            out = f"{p}/add:out"
            self.nodes.append(helper.make_node("Add", [x, y], [out], name=f"{p}/add"))
            y = out
        return y

# (expansion, output channels, stride) per inverted residual block
BLOCKS = ((1, 16, 1), (4, 24, 2), (4, 24, 1), (4, 32, 2), (4, 32, 1))


def mobilenet_v2(
    *, batch: int | str = "N", size: int = 32, num_classes: int = 10, seed: int = 0, blocks=BLOCKS
) -> onnx.ModelProto:
    """A MobileNetV2-style classifier; ``batch`` may be an int or a symbolic name."""
    g = _Graph(seed)
    x = g.relu("relu1", g.bn("bn1", g.conv("conv1", "input", 3, 16, 3, stride=2), 16))
    cin = 16
    for i, (t, cout, stride) in enumerate(blocks, start=1):
        x, cin = g.inverted_residual(f"block{i}", x, cin, t, cout, stride), cout
    pooled = "pool:out"
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], [pooled], name="pool"))
    flat = "flatten:out"
    g.nodes.append(helper.make_node("Flatten", [pooled], [flat], name="flatten", axis=1))
    w = g.weight("classifier.weight", (num_classes, cin))
    b = g.const("classifier.bias", np.zeros(num_classes, dtype=np.float32))
    g.nodes.append(helper.make_node("Gemm", [flat, w, b], ["logits"], name="classifier", transB=1))
    graph = helper.make_graph(
        g.nodes,
        "mobilenet_v2_mini",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, num_classes])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-trt-examples"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def conv_bn_relu(*, batch: int | str = "N", channels: int = 8, size: int = 16, seed: int = 0) -> onnx.ModelProto:
    """The smallest fusable chain: conv1 -> bn1 -> relu1."""
    g = _Graph(seed)
    y = g.relu("relu1", g.bn("bn1", g.conv("conv1", "input", 3, channels, 3), channels))
    graph = helper.make_graph(
        g.nodes,
        "conv_bn_relu",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, [batch, channels, size, size])],
        g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-trt-examples"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def mobilenet_v2_planted(**kwargs: object) -> onnx.ModelProto:
    """A planted bug for differential tests: :func:`mobilenet_v2` with the stem's ReLU turned into a ReLU6.

    It mimics an optimizer that fuses conv1 + bn1 + relu1 with the wrong
    activation: outputs change only where a stem activation exceeds 6, i.e.
    for large input values; inputs in 0..1 (images) never show it.
    """
    model = mobilenet_v2(**kwargs)  # type: ignore[arg-type]
    stem = next(n for n in model.graph.node if n.name == "relu1")
    lo = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "relu1.planted_min")
    hi = numpy_helper.from_array(np.array(6.0, dtype=np.float32), "relu1.planted_max")
    model.graph.initializer.extend([lo, hi])
    stem.op_type = "Clip"
    stem.input.extend([lo.name, hi.name])
    onnx.checker.check_model(model)
    return model


def mobilenet_v2_twice(**kwargs: object) -> onnx.ModelProto:
    """:func:`mobilenet_v2` computed twice on the same input, logits averaged: the same outputs for 2x the work.

    The timing benchmarks use it as "a model made 2x slower" whose golden outputs still match.
    """
    one = mobilenet_v2(**kwargs)  # type: ignore[arg-type]
    graph = onnx.GraphProto()
    graph.CopyFrom(one.graph)

    def renamed(name: str) -> str:
        return name if name in ("input", "") else f"copy2/{name}"

    for node in one.graph.node:
        twin = graph.node.add()
        twin.CopyFrom(node)
        twin.name = f"copy2/{node.name}"
        twin.input[:] = [renamed(n) for n in node.input]
        twin.output[:] = [renamed(n) for n in node.output]
    for init in one.graph.initializer:
        twin_init = graph.initializer.add()
        twin_init.CopyFrom(init)
        twin_init.name = renamed(init.name)
    # logits = (a + b) / 2: rename the first copy's output, add a mean node producing "logits"
    for node in graph.node:
        if node.name == "classifier":
            node.output[:] = ["copy1/logits"]
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "twice.half")
    graph.initializer.append(half)
    graph.node.extend([
        helper.make_node("Add", ["copy1/logits", "copy2/logits"], ["twice.sum"], name="twice/add"),
        helper.make_node("Mul", ["twice.sum", "twice.half"], ["logits"], name="twice/mean"),
    ])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="pytest-trt-examples"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: str | Path) -> Path:
    """Write ``model`` to ``path`` atomically, only if its bytes changed."""
    path = Path(path)
    data = model.SerializeToString()
    if path.is_file() and path.read_bytes() == data:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path


def write_all(folder: str | Path) -> dict[str, Path]:
    folder = Path(folder)
    return {
        "mobilenet_v2": save(mobilenet_v2(), folder / "mobilenet_v2.onnx"),
        "mobilenet_v2_b1": save(mobilenet_v2(batch=1), folder / "mobilenet_v2_b1.onnx"),
        "conv_bn_relu": save(conv_bn_relu(), folder / "conv_bn_relu.onnx"),
        "mobilenet_v2_planted": save(mobilenet_v2_planted(), folder / "mobilenet_v2_planted.onnx"),
        "mobilenet_v2_twice": save(mobilenet_v2_twice(), folder / "mobilenet_v2_twice.onnx"),
    }


if __name__ == "__main__":
    for name, p in write_all(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "models").items():
        print(f"{name}: {p}")
