"""ONNX Runtime build evidence: its session log and the BuildRecord from the graph diff.

ONNX Runtime has no layer listing like TensorRT's; what it does to a model
is visible in two places, both read here:

* the optimized model it saves (``SessionOptions.optimized_model_filepath``):
  its nodes are the engine's layers.  Each layer's *origins* are the original
  ONNX nodes it replaced, found by walking the original graph backwards from
  the tensors the layer produces until tensors that still exist in the
  optimized graph (so a fused Conv+BN+ReLU owns conv1, bn1 and relu1, and a
  layer never claims nodes another layer computes).  Tensors ONNX Runtime
  renamed are mapped back by the rules of :func:`pytest_trt.buildlog.ort_graph.resolve_aliases` (names,
  fused activations, input positions); a layer whose origins cannot be traced
  to its own inputs gets an ``INFO`` message "pytest-trt: uncertain origins of
  layer X" and makes ``origins_exact`` False;
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
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

import onnx

from pytest_trt.buildlog.ort_graph import (
    QUANTIZED_OPS,
    GraphIndex,
    fusion_pass,
    inlined_function_owner,
    is_layout,
    origins_of,
    resolve_aliases,
)
from pytest_trt.buildlog.record import BuildRecord, FusionEvent, Layer, Message, TensorInfo
from pytest_trt.common.logtext import LogEntry

__all__ = ["parse_ort_log", "record_from_models", "transformers_fired"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# 2026-11-30 03:34:04.980901133 [I:onnxruntime:logid, graph_transformer.cc:15 Apply] text
_LINE = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<frac>\.\d+)? "
    r"\[(?P<sev>[VIWEF]):onnxruntime:(?P<logid>[^,\]]*), (?P<where>[^\]]*)\] ?(?P<text>.*)$"
)
_SEVERITY = {"V": "VERBOSE", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "INTERNAL_ERROR"}
#: prefix of the record's INFO message for a layer whose origins are a guess (not a log line)
UNCERTAIN_PREFIX = "pytest-trt: uncertain origins of layer"
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
    ("com.microsoft", "QuickGelu"): ("QuickGeluFusion",),
    ("com.microsoft", "BiasGelu"): ("BiasGeluFusion",),
    ("", "LayerNormalization"): ("LayerNormFusionL1", "LayerNormFusionL2", "LayerNormFusion"),
    ("com.microsoft", "SkipLayerNormalization"): ("SkipLayerNormFusion",),
    ("com.microsoft", "Attention"): ("AttentionFusion",),
}


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
    alias, types, shapes, _ = resolve_aliases(orig, opt)
    materialized = set(alias.values())
    fired = transformers_fired(log_entries)
    layers: list[Layer] = []
    events: list[FusionEvent] = []
    uncertain: list[str] = []
    moved_transposes, permuted = _moved_transposes(orig, opt)
    for i, node in enumerate(opt.nodes):
        layout = is_layout(orig, node)
        produced = [alias[t] for t in node.output if t in alias]
        origins: tuple[str, ...] = ()
        owner = None if layout or produced else inlined_function_owner(orig, opt, node, alias)
        if owner is not None:
            origins = (owner,)  # a part of a function op ONNX Runtime inlined; the other parts share it
        elif not layout:
            origins, frontier = origins_of(orig, produced, materialized - set(produced))
            own_inputs = {alias[t] for t in node.input if t in alias}
            moved = bool(permuted.intersection(node.input) or permuted.intersection(node.output)) or (
                moved_transposes
                and node.op_type != "Transpose"
                and any(orig.nodes[orig.by_name[o]].op_type == "Transpose" for o in origins if orig.has_node(o))
            )
            if not produced or not frontier <= own_inputs or moved:
                uncertain.append(node.name or f"{node.op_type}_{i}")
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
            named = fusion_pass(node)
            candidates = ((named,) if named else ()) + FUSION_PASSES.get((node.domain, node.op_type), ())
            pass_name = next((p for p in candidates if p in fired), None)
            events.extend(FusionEvent(pass_name, origins[0], other) for other in origins[1:])
    return BuildRecord(
        source="onnxruntime",
        layers=tuple(layers),
        fusion_events=tuple(events),
        layer_counts=(("Original", len(orig.nodes)), ("Optimized", len(opt.nodes))),
        timings={"session_creation_s": round(log_entries[-1].time, 6)} if log_entries else {},
        messages=_messages(log_entries, fired, uncertain),
        backend="onnxruntime",
        backend_version=backend_version,
        origins_exact=not uncertain,  # every unmapped, unexplained layer is listed as uncertain
        unparsed_lines=unparsed_lines,
        total_lines=sum(e.text.count("\n") + 1 for e in log_entries),
    )


def _moved_transposes(orig: GraphIndex, opt: GraphIndex) -> tuple[bool, set[str]]:
    """Whether the transpose optimizer moved the model's Transposes, and the tensors its inserted ones touch."""
    # the transpose optimizer moves a model's Transposes (it inserts new ones): a removed one is then
    # implemented by an inserted Transpose elsewhere, not by the layer a walk would give it to
    moved = any(n.op_type == "Transpose" and is_layout(orig, n) for n in opt.nodes) and any(
        n.op_type == "Transpose" and not opt.has_node(n.name) for n in orig.nodes
    )
    # tensors on either side of an inserted Transpose hold the same data in another order: when the
    # model's own Transposes were moved, the alias across it names a tensor the layer did not compute
    if not moved:
        return False, set()
    layouts = [n for n in opt.nodes if n.op_type == "Transpose" and is_layout(orig, n)]
    return True, {t for n in layouts for t in [*n.input, *n.output]}


def _messages(
    log_entries: Sequence[LogEntry], fired: Mapping[str, int], uncertain: Sequence[str]
) -> tuple[Message, ...]:
    """The session log's warnings and errors, the transformers that fired, and the layers of uncertain origin."""
    messages = [
        Message(e.severity, _message_text(e))
        for e in log_entries
        if e.severity in ("WARNING", "ERROR", "INTERNAL_ERROR")
    ]
    messages.extend(Message("INFO", f"GraphTransformer {name} modified: {n}") for name, n in fired.items())
    messages.extend(
        Message("INFO", f"{UNCERTAIN_PREFIX} {name}: origins cannot be traced to its own inputs") for name in uncertain
    )
    return tuple(messages)


def _tensor(name: str, types: dict[str, int], shapes: dict[str, tuple[int, ...]]) -> TensorInfo:
    return TensorInfo(name, shapes.get(name, ()), _dtype(types.get(name)))
