"""ONNX Runtime build evidence: its session log and the BuildRecord from the graph diff.

ONNX Runtime has no layer listing like TensorRT's; what it does to a model
is visible in two places, both read here:

* the optimized model it saves (``SessionOptions.optimized_model_filepath``):
  its nodes are the engine's layers.  Each layer's *origins* are the original
  ONNX nodes it replaced, found by walking the original graph backwards from
  the tensors the layer produces until tensors that still exist in the
  optimized graph (so a fused Conv+BN+ReLU owns conv1, bn1 and relu1, and a
  layer never claims nodes another layer computes).  Tensors ONNX Runtime
  renamed are mapped back by the rules of :func:`resolve_aliases` (layout ops
  are identities, fused nodes keep their first node's name, NCHWc nodes are
  named after the tensor they compute);
* the VERBOSE session log (``GraphTransformer X modified: N``): the
  transformers that fired.

How the facts land in :class:`BuildRecord` (documented for the record diff):

* ``layers``: one per optimized node; ``kind="reformat"`` for ONNX Runtime's
  layout conversions (``ReorderInput``/``ReorderOutput``, inserted
  ``Transpose``), which have no origins;
* ``precision``: the first output's element type, except quantized compute
  ops (``QLinearConv``, ``MatMulInteger``, ...) which report the 8-bit type
  they compute in: ``Int8`` when any 8-bit input is signed, else ``UInt8``;
* ``fusion_events``: one per extra origin of each fused layer,
  ``FusionEvent(pass_name, first_origin, other_origin)``, ``pass_name`` being
  the transformer (from the log) known to produce that op, else ``None``;
* ``messages``: the log's warnings and errors, then one ``INFO`` message per
  transformer that modified the graph, ``GraphTransformer X modified: N``
  (summed over steps), so a record diff shows a transformer that stopped firing;
* ``layer_counts``: ``("Original", n)`` and ``("Optimized", m)`` node counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import onnx

from pytest_trt.buildlog.record import BuildRecord, FusionEvent, Layer, Message, TensorInfo
from pytest_trt.result import LogEntry

__all__ = ["parse_ort_log", "record_from_models", "transformers_fired"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# 2026-11-30 03:34:04.980901133 [I:onnxruntime:logid, graph_transformer.cc:15 Apply] text
_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<frac>\.\d+)? "
    r"\[(?P<sev>[VIWEF]):onnxruntime:(?P<logid>[^,\]]*), (?P<where>[^\]]*)\] ?(?P<text>.*)$"
)
_SEVERITY = {"V": "VERBOSE", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "INTERNAL_ERROR"}
_FIRED = re.compile(r"^GraphTransformer (?P<name>\S+) modified: (?P<n>\d+) with status: OK")

_ELEM_TO_DTYPE: dict[int, str] = {
    onnx.TensorProto.FLOAT: "Float",
    onnx.TensorProto.FLOAT16: "Half",
    onnx.TensorProto.BFLOAT16: "BFloat16",
    onnx.TensorProto.INT8: "Int8",
    onnx.TensorProto.UINT8: "UInt8",
    onnx.TensorProto.INT32: "Int32",
    onnx.TensorProto.INT64: "Int64",
    onnx.TensorProto.BOOL: "Bool",
    onnx.TensorProto.FLOAT8E4M3FN: "FP8",
    onnx.TensorProto.INT4: "Int4",
}
#: ops whose arithmetic runs on 8-bit integers (their outputs may be float, e.g. DynamicQuantizeMatMul)
QUANTIZED_OPS = frozenset(
    {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
     "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
     "QLinearConcat", "QLinearSoftmax", "QGemm", "QLinearWhere", "QLinearReduceMean"}
)
#: which transformer produces an optimized op: (domain, op_type) -> candidates, first that fired wins
FUSION_PASSES: dict[tuple[str, str], tuple[str, ...]] = {
    ("com.microsoft", "FusedConv"): ("ConvActivationFusion",),
    ("com.microsoft.nchwc", "Conv"): ("NchwcTransformer",),
    ("com.microsoft", "FusedGemm"): ("GemmActivationFusion",),
    ("com.microsoft", "FusedMatMul"): ("MatMulScaleFusion", "MatmulTransposeFusion"),
    ("", "Gemm"): ("MatMulAddFusion",),
    ("", "Conv"): ("Level1_RuleBasedTransformer", "ConvAddFusion", "ConvMulFusion"),
    ("", "QLinearConv"): ("QDQSelectorActionTransformer",),
    ("com.microsoft", "QLinearConv"): ("QDQSelectorActionTransformer", "NhwcTransformer"),
    ("", "QLinearMatMul"): ("QDQSelectorActionTransformer",),
    ("com.microsoft", "Gelu"): ("GeluFusionL1", "GeluFusionL2", "GeluFusion"),
    ("com.microsoft", "FastGelu"): ("FastGeluFusion",),
    ("com.microsoft", "BiasGelu"): ("BiasGeluFusion",),
    ("", "LayerNormalization"): ("LayerNormFusionL1", "LayerNormFusionL2", "LayerNormFusion"),
    ("com.microsoft", "SkipLayerNormalization"): ("SkipLayerNormFusion",),
    ("com.microsoft", "Attention"): ("AttentionFusion",),
}


#: ONNX Runtime's own layout conversions, per domain: identities as far as origins are concerned
LAYOUT_OPS: dict[str, tuple[str, ...]] = {
    "com.microsoft.nchwc": ("ReorderInput", "ReorderOutput"),
    "": ("Transpose",),  # inserted by the NHWC layout transformer; a model's own Transpose keeps its name
}
# ORT makes generated node names unique by appending "_token_<n>" (graph.cc GenerateNodeName)
_TOKEN_SUFFIX = re.compile(r"_token_\d+$")
_NCHWC_SUFFIX = "_nchwc"  # NchwcTransformer names its nodes "<output tensor>_nchwc"


@dataclass
class GraphIndex:
    """Lookup tables over one graph: producers, consumers, node names, constants."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto] = field(init=False)
    producer: dict[str, int] = field(init=False)
    consumers: dict[str, list[int]] = field(init=False)
    by_name: dict[str, int] = field(init=False)
    constants: set[str] = field(init=False)
    graph_inputs: set[str] = field(init=False)

    def __post_init__(self) -> None:
        g = self.model.graph
        self.nodes = list(g.node)
        self.producer, self.consumers, self.by_name = {}, {}, {}
        for i, n in enumerate(self.nodes):
            self.by_name.setdefault(n.name, i)
            for t in n.output:
                if t:
                    self.producer[t] = i
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(i)
        self.constants = {t.name for t in g.initializer}
        self.graph_inputs = {v.name for v in g.input} - self.constants

    def has_node(self, name: str) -> bool:
        return bool(name) and name in self.by_name

    def is_activation(self, tensor: str) -> bool:
        """A computed or fed tensor (not an initializer)."""
        return tensor in self.producer or tensor in self.graph_inputs

    def tensor_types(self) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
        """Element types and shapes known from the model and ONNX shape inference (-1: unknown dim)."""
        try:
            model = onnx.shape_inference.infer_shapes(self.model, strict_mode=False)
        except Exception:  # noqa: BLE001 - inference is best effort; custom domains may defeat it
            model = self.model
        types: dict[str, int] = {t.name: t.data_type for t in model.graph.initializer}
        shapes: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in model.graph.initializer}
        g = model.graph
        for v in [*g.input, *g.output, *g.value_info]:
            tt = v.type.tensor_type
            if tt.elem_type:
                types.setdefault(v.name, tt.elem_type)
            if tt.HasField("shape"):
                shapes.setdefault(v.name, tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim))
        return types, shapes


def _propagate_types(opt: GraphIndex, types: dict[str, int]) -> None:
    """Fill types shape inference could not give (contrib ops), by the op's type rule."""
    for node in opt.nodes:  # saved models are topologically sorted
        for k, out in enumerate(node.output):
            if not out or out in types:
                continue
            ins = list(node.input)
            if node.op_type == "QuantizeLinear":
                elem = types.get(ins[2]) if len(ins) > 2 and ins[2] else onnx.TensorProto.UINT8
            elif node.op_type == "DequantizeLinear":
                elem = types.get(ins[1]) if len(ins) > 1 else None
            elif node.op_type == "Cast":
                elem = next((a.i for a in node.attribute if a.name == "to"), None)
            elif node.op_type in ("Shape", "Size"):
                elem = onnx.TensorProto.INT64
            elif node.op_type.startswith("QLinear") or node.op_type == "QGemm":
                # output zero point is the last input of every QLinear* op
                elem = types.get(ins[-1]) if ins and ins[-1] else None
            else:
                elem = types.get(ins[0]) if ins and ins[0] else None
            if elem and k == 0:
                types[out] = elem


def resolve_aliases(
    orig: GraphIndex, opt: GraphIndex
) -> tuple[dict[str, str], dict[str, int], dict[str, tuple[int, ...]], bool]:
    """Map optimized-graph tensors to the original tensors they hold.

    Returns (alias, types, shapes, exact): ``alias`` maps optimized tensor ->
    original tensor, ``types``/``shapes`` are per optimized tensor, ``exact``
    is False when some compute node's outputs could not be mapped (its work is
    then attributed to the layer consuming them).
    """
    alias: dict[str, str] = {}
    names = {t for n in opt.nodes for t in [*n.input, *n.output] if t} | opt.graph_inputs
    for t in names:
        if orig.is_activation(t) and t not in opt.constants:
            alias[t] = t
    orig_types, _ = orig.tensor_types()
    types, shapes = opt.tensor_types()
    for t in alias:
        if t in orig_types:
            types.setdefault(t, orig_types[t])
    _propagate_types(opt, types)

    taken = set(alias.values())

    def claim(tensor: str, target: str) -> bool:
        # an original tensor that still exists (or is already claimed) is not re-assigned
        if tensor in alias or not target or target in taken:
            return False
        alias[tensor] = target
        taken.add(target)
        return True

    changed = True
    while changed:
        changed = False
        for node in opt.nodes:
            base = _TOKEN_SUFFIX.sub("", node.name)
            if _is_layout(orig, node) and node.input and node.output:
                src, dst = node.input[0], node.output[0]
                if src in alias and dst not in alias:
                    alias[dst] = alias[src]
                    changed = True
                elif dst in alias and src not in alias:
                    alias[src] = alias[dst]
                    changed = True
            elif orig.has_node(base):
                original = orig.nodes[orig.by_name[base]]
                for k, out in enumerate(node.output):
                    if k < len(original.output):
                        changed |= claim(out, _summed(orig, node, _requantized(orig, node, original.output[k])))
            elif node.name.endswith(_NCHWC_SUFFIX) and node.output:
                target = node.name[: -len(_NCHWC_SUFFIX)]
                if orig.is_activation(target):
                    changed |= claim(node.output[0], _summed(orig, node, target))
    exact = all(any(t in alias for t in n.output) for n in opt.nodes if not _is_layout(orig, n))
    return alias, types, shapes, exact


def _is_layout(orig: GraphIndex, node: onnx.NodeProto) -> bool:
    """A layout conversion ONNX Runtime inserted (a model's own Transpose keeps its original name)."""
    return node.op_type in LAYOUT_OPS.get(node.domain, ()) and not orig.has_node(node.name)


def _requantized(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A QLinear* op that replaced DQ -> op -> Q outputs the Q's tensor, not the op's float one."""
    users = orig.consumers.get(target, [])
    if node.op_type in QUANTIZED_OPS and len(users) == 1 and orig.nodes[users[0]].op_type == "QuantizeLinear":
        return str(orig.nodes[users[0]].output[0])
    return target


def _summed(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A Conv with a 4th ("Sum"/"Z") input has absorbed the Add after it: its output is the Add's."""
    if node.op_type not in ("Conv", "FusedConv") or len(node.input) < 4 or not node.input[3]:
        return target
    users = orig.consumers.get(target, [])
    if len(users) == 1 and orig.nodes[users[0]].op_type in ("Add", "Sum"):
        return str(orig.nodes[users[0]].output[0])
    return target


def parse_ort_log(text: str, start: float) -> tuple[tuple[LogEntry, ...], int]:
    """Turn ONNX Runtime's console log into entries; return (entries, unrecognised line count).

    ``start`` is the wall-clock time (``time.time()``) the build started;
    entry times are seconds since then.  A line without ORT's header
    continues the previous message; one before any header (output of other
    native code on the same descriptor) becomes an ``INFO`` entry and is
    counted as unrecognised, never dropped.
    """
    entries: list[list[str | float]] = []
    unparsed = 0
    first_epoch: float | None = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip("\r")
        m = _LINE.match(line)
        if m is None:
            if not line.strip():
                continue
            if entries:
                entries[-1][2] = f"{entries[-1][2]}\n{line}"
            else:
                unparsed += 1
                entries.append(["INFO", 0.0, line])
            continue
        epoch = _epoch(m["ts"], m["frac"] or "")
        if first_epoch is None:
            first_epoch = epoch
        # ORT stamps local wall-clock time; when that disagrees with our clock
        # (odd time zone data), fall back to times relative to the first line.
        t = epoch - start
        if not -1.0 < t < 86400.0:
            t = epoch - first_epoch
        entries.append([_SEVERITY[m["sev"]], max(0.0, t), f"[{m['where']}] {m['text']}"])
    return tuple(LogEntry(str(s), float(t), str(x)) for s, t, x in entries), unparsed


def _epoch(ts: str, frac: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").timestamp() + (float(frac) if frac else 0.0)


def _message_text(entry: LogEntry) -> str:
    """An entry's text without the ``[file.cc:NN Function] `` source prefix."""
    if entry.text.startswith("["):
        end = entry.text.find("] ")
        if end != -1:
            return entry.text[end + 2 :]
    return entry.text


def transformers_fired(entries: Iterable[LogEntry]) -> dict[str, int]:
    """Transformer name -> nodes modified (summed over steps), for those that modified anything, in log order."""
    fired: dict[str, int] = {}
    for e in entries:
        m = _FIRED.match(_message_text(e))
        if m and int(m["n"]) > 0:
            fired[m["name"]] = fired.get(m["name"], 0) + int(m["n"])
    return fired


def _origins(index: GraphIndex, produced: Sequence[str], materialized: set[str]) -> tuple[str, ...]:
    """Original nodes between ``produced`` and the tensors that still exist, in original graph order."""
    found: set[int] = set()
    stack = [t for t in produced if t in index.producer]
    seen: set[str] = set()
    while stack:
        tensor = stack.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        node = index.producer.get(tensor)
        if node is None or node in found:
            continue
        found.add(node)
        for name in index.nodes[node].input:
            if name and name not in materialized and name in index.producer:
                stack.append(name)
    return tuple(index.nodes[i].name or f"{index.nodes[i].op_type}_{i}" for i in sorted(found))


def _dtype(elem: int | None) -> str | None:
    return _ELEM_TO_DTYPE.get(elem) if elem is not None else None


def _precision(node: onnx.NodeProto, types: dict[str, int]) -> str | None:
    if node.op_type in QUANTIZED_OPS:
        eight = [types.get(t) for t in node.input if types.get(t) in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)]
        if eight:
            return "Int8" if onnx.TensorProto.INT8 in eight else "UInt8"
    return _dtype(types.get(node.output[0])) if node.output else None


def record_from_models(
    original: onnx.ModelProto,
    optimized: onnx.ModelProto,
    log_entries: Sequence[LogEntry] = (),
    *,
    backend_version: str | None = None,
    unparsed_lines: int = 0,
) -> BuildRecord:
    """The BuildRecord of an ONNX Runtime "engine": ``optimized`` compared with ``original``.

    ``log_entries`` is the captured session log (warnings, errors and the
    transformers that fired come from it); see the module docstring for how
    each fact is recorded.
    """
    orig = GraphIndex(original)
    opt = GraphIndex(optimized)
    alias, types, shapes, exact = resolve_aliases(orig, opt)
    materialized = set(alias.values())
    fired = transformers_fired(log_entries)
    layers: list[Layer] = []
    events: list[FusionEvent] = []
    for i, node in enumerate(opt.nodes):
        layout = _is_layout(orig, node)
        produced = [alias[t] for t in node.output if t in alias]
        origins = () if layout else _origins(orig, produced, materialized - set(produced))
        layer = Layer(
            name=node.name or f"{node.op_type}_{i}",
            type=node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}",
            origins=origins,
            inputs=tuple(_tensor(t, types, shapes) for t in node.input if t),
            outputs=tuple(_tensor(t, types, shapes) for t in node.output if t),
            precision=_precision(node, types),
            kind="reformat" if layout else "compute",
        )
        layers.append(layer)
        if layer.is_fusion:
            candidates = FUSION_PASSES.get((node.domain, node.op_type), ())
            pass_name = next((p for p in candidates if p in fired), None)
            events.extend(FusionEvent(pass_name, origins[0], other) for other in origins[1:])
    messages = [
        Message(e.severity, _message_text(e))
        for e in log_entries
        if e.severity in ("WARNING", "ERROR", "INTERNAL_ERROR")
    ]
    messages.extend(Message("INFO", f"GraphTransformer {name} modified: {n}") for name, n in fired.items())
    return BuildRecord(
        source="onnxruntime",
        layers=tuple(layers),
        fusion_events=tuple(events),
        layer_counts=(("Original", len(orig.nodes)), ("Optimized", len(opt.nodes))),
        timings={"session_creation_s": round(log_entries[-1].time, 6)} if log_entries else {},
        messages=tuple(messages),
        backend="onnxruntime",
        backend_version=backend_version,
        origins_exact=exact,
        unparsed_lines=unparsed_lines,
        total_lines=sum(e.text.count("\n") + 1 for e in log_entries),
    )


def _tensor(name: str, types: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> TensorInfo:
    return TensorInfo(name, shapes.get(name, ()), _dtype(types.get(name)))
