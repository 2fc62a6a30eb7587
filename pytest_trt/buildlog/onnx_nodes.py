"""An ONNX model's nodes as the fusion assertions name them: name, op type, domain, inputs, outputs, parent graph."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def model_nodes(model: Path) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The opsets (``{domain: version}``) and every node of ``model``; ValueError naming the file when it is none."""
    if model.is_dir():
        raise ValueError(f"{model}: is a directory, not an ONNX model")
    if not model.is_file():
        raise ValueError(f"{model}: no such file")
    import onnx

    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, onnx's own errors
        raise ValueError(f"{model}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not proto.ir_version:  # protobuf reads many non-ONNX files as an empty message
        raise ValueError(f"{model}: not an ONNX model (no IR version); give the .onnx file")
    opsets = {imp.domain or "ai.onnx": imp.version for imp in proto.opset_import}
    return opsets, graph_nodes(proto.graph)


def graph_nodes(graph: Any, parent: str = "") -> list[dict[str, Any]]:
    """Every node of ``graph`` in graph order, the nodes of its subgraphs (If, Loop, Scan) after their parent."""
    rows: list[dict[str, Any]] = []
    for node in graph.node:
        rows.append({"name": node.name, "op_type": node.op_type, "domain": node.domain or "ai.onnx",
                     "inputs": list(node.input), "outputs": list(node.output), "parent": parent or None})
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                rows += graph_nodes(sub, node.name or node.output[0])
    return rows
