"""Readers of one engine-layer entry, whatever printed it, into a :class:`Layer`.

* ``Engine Layer Information:`` lines (8.0 .. 10.x, NOTES §5): ``Layer(Type): name, Tactic: t, ins -> outs``
  with the old tensor token ``name[Float(-2,1,28,28)]`` (.. 8.4) or the new ``name (Float[-1,1,28,28])`` (8.5 ..);
* DETAILED ``Name: ..., LayerType: ...`` lines (10.x, TensorRT-RTX; §6), whose tensors say
  ``Format/Datatype: Half`` (10.x, RTX 1.4) or ``Datatype: Float, Format: (NHWC) ...`` (RTX 1.7);
* layer-JSON objects (``--exportLayerInfo``, IEngineInspector; §10), same fields as the DETAILED line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from .dialects import ONNX_LAYER_RE
from .names import OnnxIndex, origins_from_name
from .parts import Layer, TensorInfo

_DTYPE_WORDS = {
    "float": "Float", "fp32": "Float", "float32": "Float",
    "half": "Half", "fp16": "Half", "float16": "Half",
    "bfloat16": "BFloat16", "bf16": "BFloat16",
    "int8": "Int8", "fp8": "FP8", "int4": "Int4", "fp4": "FP4",
    "int32": "Int32", "int64": "Int64", "bool": "Bool", "uint8": "UInt8",
}
_DTYPE_RE = re.compile(r"\b(" + "|".join(sorted(_DTYPE_WORDS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def canonical_dtype(text: str | None) -> str | None:
    """``"Row major linear FP32"`` -> ``"Float"``; ``"half"`` -> ``"Half"``; None when no dtype is named."""
    if not text:
        return None
    m = _DTYPE_RE.search(text)
    return _DTYPE_WORDS[m.group(1).lower()] if m else None


# -- Engine Layer Information ---------------------------------------------------------------------

ELI_RE = re.compile(
    r"Layer\((?P<type>[^)]*)\): (?P<name>.*?), Tactic: (?P<tactic>-?\d+|0x[0-9a-fA-F]+), (?P<ins>.*?) -> (?P<outs>.*)$"
)
_DT = r"Float|Half|BFloat16|Int8|FP8|Int4|FP4|Int32|Int64|Bool|UInt8"
TENSOR_OLD_RE = re.compile(r"(?P<name>.+?)\[(?P<dt>" + _DT + r")\((?P<dims>[^)]*)\)\](?:, |\s*$)")  # .. 8.4
TENSOR_NEW_RE = re.compile(r"(?P<name>.+?) \((?P<dt>" + _DT + r")\[(?P<dims>[^\]]*)\]\)(?:, |\s*$)")  # 8.5 ..


def _dims(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip().split(":", 1)[0]  # "1:2" is channel 1 vectorised by 2 (8.5 .. "Half[-1,1:2,28,28]")
        try:
            out.append(int(part))
        except ValueError:
            continue
    return tuple(out)


def parse_eli_tensors(text: str) -> tuple[TensorInfo, ...]:
    """The tensor tokens of one side of ``ins -> outs`` (empty side: ``()``)."""
    if not text.strip():
        return ()
    for rx, fmt in ((TENSOR_NEW_RE, "{dt}[{dims}]"), (TENSOR_OLD_RE, "{dt}({dims})")):
        found = [
            TensorInfo(m["name"], _dims(m["dims"]), m["dt"],
                       fmt.format(dt=m["dt"], dims=m["dims"]) if ":" in m["dims"] else None)  # vectorized: keep it
            for m in rx.finditer(text)
        ]
        if found:
            return tuple(found)
    return (TensorInfo(text.strip()),)


def parse_eli_line(text: str) -> tuple[str, str, str, tuple[TensorInfo, ...], tuple[TensorInfo, ...]] | None:
    """``Layer(T): name, Tactic: t, ins -> outs`` -> (type, name, tactic, inputs, outputs)."""
    m = ELI_RE.match(text)
    if m is None:
        return None
    return m["type"], m["name"], m["tactic"], parse_eli_tensors(m["ins"]), parse_eli_tensors(m["outs"])


# -- DETAILED listing line ------------------------------------------------------------------------

_OBJ_RE = re.compile(r"Name: (?P<name>.*?), (?:Location: \w+, )?Dimensions: \[(?P<dims>[^\]]*)\](?P<rest>.*)$", re.S)
_FMT_DT_RE = re.compile(r"Format/Datatype: (?P<v>.*?)\s*$", re.S)
_DT_RE = re.compile(r"(?:^|, )Datatype: (?P<v>[^,]*)")
_FMT_RE = re.compile(r", Format: (?P<v>.*?)\s*$", re.S)
_TACTIC_NAME_RE = re.compile(r"TacticName: (?P<v>.*?), (?:TacticValue|StreamId|Metadata)")
_TACTIC_VALUE_RE = re.compile(r"TacticValue: (?P<v>0x[0-9a-fA-F]+|-?\d+)")


#: the brackets :func:`_close` counts, by the opening one: the regex engine skips every other character
_BRACKETS = {"[": re.compile(r"[\[\]]"), "{": re.compile(r"[{}]")}


def _close(text: str, start: int, opener: str) -> int:
    """Index just past the bracket matching ``text[start]`` (or len(text) when it never closes)."""
    depth = 0
    for m in _BRACKETS[opener].finditer(text, start):
        if m.group() == opener:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end()
    return len(text)


def _tensor_list(text: str, key: str, pos: int = 0) -> tuple[tuple[TensorInfo, ...], int]:
    at = text.find(f"{key}: [", pos)
    if at < 0:
        return (), pos
    start = at + len(key) + 2
    end = _close(text, start, "[")
    body = text[start + 1 : end - 1]
    out: list[TensorInfo] = []
    i = body.find("{")
    while i >= 0:
        j = _close(body, i, "{")
        m = _OBJ_RE.match(body[i + 1 : j - 1].strip())
        if m is not None:
            rest = m["rest"]
            fd = _FMT_DT_RE.search(rest)
            if fd is not None:
                dtype, fmt = canonical_dtype(fd["v"]), fd["v"]
            else:
                dt, ft = _DT_RE.search(rest), _FMT_RE.search(rest)
                dtype, fmt = canonical_dtype(dt["v"] if dt else None), (ft["v"] if ft else None)
            out.append(TensorInfo(m["name"], _dims(m["dims"]), dtype, fmt))
        i = body.find("{", j)
    return tuple(out), end


def is_detailed_line(text: str) -> bool:
    """Whether :func:`parse_detailed_line` reads ``text`` (without parsing its tensors)."""
    return text.startswith("Name: ") and ", LayerType: " in text


def parse_detailed_line(text: str) -> dict[str, Any] | None:
    """``Name: n, LayerType: t, Inputs: [...], ..., Metadata: m`` -> the fields of a layer-JSON object."""
    if not is_detailed_line(text):
        return None
    lt = text.find(", LayerType: ")
    name = text[6:lt]
    type_end = text.find(",", lt + 13)
    ltype = text[lt + 13 : type_end if type_end >= 0 else len(text)].strip()
    inputs, pos = _tensor_list(text, "Inputs", lt)
    outputs, pos = _tensor_list(text, "Outputs", pos)
    tail = text[pos:]
    tn = _TACTIC_NAME_RE.search(tail)
    tv = _TACTIC_VALUE_RE.search(tail)
    meta_at = tail.rfind("Metadata: ")
    return {
        "name": name,
        "type": ltype,
        "inputs": inputs,
        "outputs": outputs,
        "tactic": (tn["v"] or None) if tn else None,
        "tactic_value": tv["v"] if tv else None,
        "metadata": tail[meta_at + 10 :] if meta_at >= 0 else None,
    }


# -- JSON objects ---------------------------------------------------------------------------------


def json_tensor(d: Mapping[str, Any]) -> TensorInfo:
    """A tensor object of layer JSON, 8.x-10.x (``Format/Datatype``) or split fields (``Datatype``, ``Format``)."""
    raw_dims = d.get("Dimensions")
    # JSON from other tools may hold null, strings, Infinity or NaN here: keep only finite numbers
    dims = tuple(int(x) for x in (raw_dims if isinstance(raw_dims, list) else ())
                 if isinstance(x, (int, float)) and math.isfinite(x))
    if "Format/Datatype" in d:
        both = str(d["Format/Datatype"])
        return TensorInfo(str(d.get("Name", "")), dims, canonical_dtype(both), both)
    raw = d.get("Datatype", d.get("DataType"))
    fmt = d.get("Format")
    dtype = canonical_dtype(str(raw) if raw else None)
    return TensorInfo(str(d.get("Name", "")), dims, dtype, str(fmt) if fmt else None)


# -- building a Layer -----------------------------------------------------------------------------


def metadata_origins(metadata: str | None) -> tuple[str, ...]:
    """``[ONNX Layer: a]\\x1e[ONNX Layer: b]`` -> ``("a", "b")``.

    Separators: U+001E (10.x), U+001F (TensorRT-RTX 1.7) or none (TensorRT-RTX 1.4).
    """
    if not metadata:
        return ()
    return tuple(dict.fromkeys(m["node"] for m in ONNX_LAYER_RE.finditer(metadata)))


def make_layer(
    *,
    name: str,
    layer_type: str,
    inputs: tuple[TensorInfo, ...] = (),
    outputs: tuple[TensorInfo, ...] = (),
    tactic: str | None = None,
    metadata: str | None = None,
    subgraphs: Mapping[str, tuple[str, ...]] | None = None,
    onnx: OnnxIndex | None = None,
) -> tuple[Layer, bool]:
    """A Layer and whether its origins are exact (from metadata or the ONNX model, not guessed from the name)."""
    origins = metadata_origins(metadata)
    exact = bool(origins)
    subgraph: str | None = None
    if subgraphs and name in subgraphs:
        subgraph = name
        if not origins and subgraphs[name]:
            origins, exact = subgraphs[name], True
    if not origins:
        origins = origins_from_name(name, onnx=onnx)
        exact = onnx is not None
    if name.startswith("Reformatting CopyNode") or (layer_type == "Reformat" and not origins):
        kind = "reformat"
    elif not origins or layer_type == "shape_call":  # TensorRT-made: unnamed shuffles, Myelin shape/move kernels
        kind = "helper"
    else:
        kind = "compute"
    precision = next((t.dtype for t in outputs[:1] if t.dtype), None)  # the first output's dtype
    layer = Layer(
        name=name, type=layer_type, origins=origins if kind != "reformat" else (), inputs=inputs, outputs=outputs,
        tactic=tactic, precision=precision, kind=kind, subgraph=subgraph,
    )
    return layer, exact or kind != "compute"


def assign_subgraphs(layers: list[Layer], subgraphs: dict[str, tuple[str, ...]]) -> list[Layer]:
    """Set ``Layer.subgraph`` of Myelin kernels to the ForeignNode holding all their origins.

    A kernel without origins (``__myl_Move_myl0_1``) is assigned only when the build has a single subgraph.
    """
    if not subgraphs:
        return layers
    named = list(subgraphs.items())[::-1]  # the latest optimizer pass first
    out: list[Layer] = []
    for layer in layers:
        if layer.subgraph is None and (layer.name.startswith("__my") or "_myl" in layer.name):
            if layer.origins:
                wanted = set(layer.origins)
                hit = next((n for n, o in named if wanted <= set(o)), None)
            else:
                hit = named[0][0] if len(named) == 1 else None
            if hit is not None:
                layer = replace(layer, subgraph=hit)
        out.append(layer)
    return out


def listing_layers(detailed: list[str], eli: list[str], subgraphs: dict[str, tuple[str, ...]],
                   onnx: OnnxIndex | None) -> tuple[tuple[Layer, ...], bool]:
    """The layers of a log's last listing, and whether all their origins are exact.

    ``detailed``: DETAILED lines (exact origins, preferred); else ``eli``: Engine Layer Information lines.
    Both are kept as text by the parser (a log of repeated builds lists its layers many times) and parsed only here.
    """
    built: list[tuple[Layer, bool]] = []
    if detailed:
        for line in detailed:
            p = parse_detailed_line(line)
            assert p is not None  # the parser keeps only lines is_detailed_line accepts
            built.append(make_layer(name=p["name"], layer_type=p["type"], inputs=p["inputs"], outputs=p["outputs"],
                                    tactic=p["tactic_value"] or p["tactic"], metadata=p["metadata"],
                                    subgraphs=subgraphs, onnx=onnx))
    else:
        for text in eli:
            parsed = parse_eli_line(text)
            assert parsed is not None  # the parser keeps only lines ELI_RE matches
            ltype, name, tactic, ins, outs = parsed
            built.append(make_layer(name=name, layer_type=ltype, inputs=ins, outputs=outs, tactic=tactic,
                                    subgraphs=subgraphs, onnx=onnx))
    layers = tuple(assign_subgraphs([b[0] for b in built], subgraphs))
    return layers, all(b[1] for b in built)
