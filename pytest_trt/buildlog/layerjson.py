"""Reader of engine layer information exported as JSON.

Schemas accepted (NOTES §10):

* 8.x to 10.x (``trtexec --exportLayerInfo``, ``IEngineInspector``, TREx ``*.graph.json``):
  ``{"Layers": [...], "Bindings": [...]}``, tensors with ``Format/Datatype``; 10.x adds a
  ``Metadata`` string ``[ONNX Layer: a]\\u001e[ONNX Layer: b]``.
* names-only (no ``--profilingVerbosity=detailed``; 8.2.3, 8.5.2, 8.6.0 here): ``Layers`` is a list of
  strings.  Origins then come from the names and the record says ``origins_exact=False``.
* 11.x-style, read tolerantly: ``I/O Tensors`` instead of ``Bindings`` and split ``Datatype``/``Format``
  tensor fields (the shape TensorRT-RTX 1.7 prints in its DETAILED log).  No 11.x file exists in the corpus.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import LogParseError
from .listings import assign_subgraphs, json_tensor, make_layer
from .names import OnnxIndex
from .parts import Layer
from .record import BuildRecord


def _binding_names(doc: Mapping[str, Any]) -> tuple[str, ...]:
    raw = doc.get("Bindings", doc.get("I/O Tensors", ()))
    out: list[str] = []
    for b in raw if isinstance(raw, list) else ():
        if isinstance(b, str):
            out.append(b)
        elif isinstance(b, Mapping) and "Name" in b:
            out.append(str(b["Name"]))
    return tuple(out)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _layer(obj: Any, onnx: OnnxIndex | None) -> tuple[Layer, bool] | None:
    if isinstance(obj, str):  # names-only export
        layer, exact = make_layer(name=obj, layer_type="Unknown", onnx=onnx)
        return layer, exact and onnx is not None
    if not isinstance(obj, Mapping) or not isinstance(obj.get("Name"), str):
        return None  # counted as unparsed: a layer without a name says nothing usable
    tensors = {k: tuple(json_tensor(t) for t in _list(obj.get(k)) if isinstance(t, Mapping))
               for k in ("Inputs", "Outputs")}
    tactic = obj.get("TacticValue") or obj.get("TacticName")  # the value is the unique id; Myelin kernels: a name
    metadata = obj.get("Metadata")
    return make_layer(
        name=obj["Name"], layer_type=str(obj.get("LayerType") or "Unknown"), inputs=tensors["Inputs"],
        outputs=tensors["Outputs"], tactic=str(tactic) if tactic else None,
        metadata=str(metadata) if metadata is not None else None, onnx=onnx,
    )


def layer_json_record(doc: Any, *, onnx: Any = None) -> BuildRecord:
    """A record from an already-loaded layer-JSON document; entries it cannot read are counted as unparsed."""
    index = OnnxIndex.load(onnx) if onnx is not None else None
    layers_raw = doc.get("Layers", ()) if isinstance(doc, Mapping) else ()
    if not isinstance(layers_raw, list):
        layers_raw = []
    built = [_layer(obj, index) for obj in layers_raw]
    good = [b for b in built if b is not None]
    layers = assign_subgraphs([b[0] for b in good], {})
    return BuildRecord(
        source="layer-json",
        layers=tuple(layers),
        origins_exact=all(b[1] for b in good),
        unparsed_lines=len(built) - len(good),
        total_lines=len(built),
        bindings=_binding_names(doc) if isinstance(doc, Mapping) else (),
    )


def load_layer_json(path: str | Path) -> Any:
    """The JSON document of a layer-information file.

    A missing, unreadable or non-JSON file raises :class:`~pytest_trt.errors.LogParseError` naming the path.
    """
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8", errors="replace"))
    except OSError as e:
        raise LogParseError(f"cannot read layer JSON {p}: {e.strerror or e}", path=str(p)) from e
    except ValueError as e:
        raise LogParseError(f"{p} is not JSON: {e}", path=str(p)) from e
