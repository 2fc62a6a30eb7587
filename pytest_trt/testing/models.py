"""Small ONNX models written with ``onnx.helper``, for tests that need a real model file but no big one."""

from __future__ import annotations

from pathlib import Path

#: names of the three compute nodes of :func:`write_classifier` (first MatMul, ReLU, second MatMul)
NODE_NAMES = ("fc1", "relu", "fc2")


def write_classifier(
    path: str | Path, *, features: int = 8, classes: int = 5, hidden: int = 16, seed: int = 0, scale: float = 1.0,
    names: tuple[str, str, str] = NODE_NAMES, argmax: bool = True, opset: int = 17,
) -> Path:
    """Write ``x (N, features) -> logits (N, classes) = relu(x @ W1) @ (W2 * scale)`` (and ``pred = argmax``).

    The weights are seeded (``W1`` then ``W2`` drawn from ``numpy.random.default_rng(seed)``), so the same
    arguments write the same bytes; ``scale`` changes the logits by that factor, the "changed model" of a
    golden regression test (an L2 delta of ``scale - 1``).  Returns ``path``.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((features, hidden)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, classes)) * scale).astype(np.float32)
    first, act, last = names
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name=first),
             helper.make_node("Relu", ["h"], ["hr"], name=act),
             helper.make_node("MatMul", ["hr", "w2"], ["logits"], name=last)]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])]
    if argmax:
        nodes.append(helper.make_node("ArgMax", ["logits"], ["pred"], name="argmax", axis=1, keepdims=0))
        outputs.append(helper.make_tensor_value_info("pred", TensorProto.INT64, ["N"]))
    graph = helper.make_graph(nodes, "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  ["N", features])],
                              outputs, [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    target = Path(path)
    onnx.save(model, str(target))
    return target
