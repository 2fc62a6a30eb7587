"""BuildRecord: the structured facts of one engine build.

Every reader (live TensorRT / TensorRT-RTX logs, trtexec logs of TensorRT 7
to 10, IEngineInspector / ``--exportLayerInfo`` JSON, ONNX Runtime optimized
graphs) produces this one type, so assertions and diffs work the same on all.  The readers import
this module, never the other way round: :mod:`.readers` has ``read_log`` and ``read_layer_json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from typing import TYPE_CHECKING, Any

from .parts import DTYPES, FusionEvent, Layer, Memory, Message, Subgraph, TensorInfo
from .schema import RECORD_SCHEMA

if TYPE_CHECKING:
    from .calibfacts import CalibrationFacts

__all__ = ["DTYPES", "RECORD_SCHEMA", "BuildRecord", "FusionEvent", "Layer", "Memory", "Message", "Subgraph",
           "TensorInfo"]


@dataclass(frozen=True)
class BuildRecord:
    source: str  # "tensorrt-log", "layer-json", "onnxruntime"
    layers: tuple[Layer, ...] = ()
    subgraphs: tuple[Subgraph, ...] = ()
    fusion_events: tuple[FusionEvent, ...] = ()
    layer_counts: tuple[tuple[str, int], ...] = ()  # ("Original", 246), ("After vertical fusions", 120) ...
    memory: Memory = field(default_factory=Memory)
    timings: dict[str, float] = field(default_factory=dict)  # "engine_generation_s", "graph_optimization_s", ...
    messages: tuple[Message, ...] = ()  # warnings and errors, in order
    calibration: tuple[str, ...] = ()  # calibration-related lines, verbatim
    backend: str | None = None
    backend_version: str | None = None
    origins_exact: bool = True  # False when origins were guessed from layer names only
    unparsed_lines: int = 0
    total_lines: int = 0
    schema: int = RECORD_SCHEMA
    bindings: tuple[str, ...] = ()  # engine I/O tensor names, when stated
    removed_layers: tuple[str, ...] = ()  # "Removing X" lines of the optimizer
    tool: str | None = None  # "trtexec", "polygraphy", "sample_int8" ... when the log says who ran the build
    tool_version: str | None = None
    result: str | None = None  # "PASSED"/"FAILED" from a trtexec/sample "&&&&" line
    precision_flags: str | None = None  # trtexec "Precision: FP32+INT8"
    engine_size_mib: float | None = None  # trtexec 10.x "Created engine with size: 6.3747 MiB"
    #: pytest-trt's own INT8 calibration of this build (algorithm, quantizer or calibrator, cache header,
    #: ranges, class counts), see :func:`pytest_trt.calibration.building.quantization_facts`; empty otherwise
    quantization: dict[str, Any] = field(default_factory=dict)
    #: builds the log held (each starts at an ``Original: N layers`` count); the record is the last one's
    builds: int = 1

    # -- derived facts -------------------------------------------------
    def precision_counts(self) -> dict[str, int]:
        """Compute layers per precision (``{"Float": 40, "Half": 3}``), most common first."""
        counts: dict[str, int] = {}
        for layer in self.layers:
            if layer.kind == "compute":
                key = layer.precision or "unknown"
                counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def facts(self) -> dict[str, Any]:
        """What a test report and the session summary show of a build: its layer and fusion counts and
        compute layers per precision."""
        return {"layers": len(self.layers), "fusions": len(self.fusions), "precisions": self.precision_counts()}

    @property
    def fusions(self) -> tuple[Layer, ...]:
        """Layers that implement two or more ONNX nodes."""
        return tuple(layer for layer in self.layers if layer.is_fusion)

    @property
    def node_precisions(self) -> dict[str, str]:
        """ONNX node name -> precision of the (last) compute layer implementing it."""
        out: dict[str, str] = {}
        for layer in self.layers:
            if layer.kind != "compute" or layer.precision is None:
                continue
            for node in layer.origins:
                out[node] = layer.precision
        return out

    @property
    def calibration_facts(self) -> CalibrationFacts:
        """Typed facts of the calibration lines and warnings (calibrator, cache, out-of-bound layers ...)."""
        from .calibfacts import calibration_facts

        return calibration_facts([*self.calibration, *(m.text for m in self.messages)])

    @property
    def reformat_count(self) -> int:
        return sum(1 for layer in self.layers if layer.kind == "reformat")

    @property
    def warnings(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.severity == "WARNING")

    @property
    def errors(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.severity in ("ERROR", "INTERNAL_ERROR"))

    def all_origins(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for layer in self.layers:
            for node in layer.origins:
                seen.setdefault(node, None)
        for sg in self.subgraphs:
            for node in sg.origins:
                seen.setdefault(node, None)
        return tuple(seen)

    # -- serialisation -------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = _plain(self)
        d["layer_counts"] = [list(x) for x in self.layer_counts]
        return d

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, **kwargs)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BuildRecord:
        schema = d.get("schema", RECORD_SCHEMA)
        if schema > RECORD_SCHEMA:
            raise ValueError(f"BuildRecord schema {schema} is newer than this pytest-trt understands ({RECORD_SCHEMA})")
        return cls(
            source=d["source"],
            layers=tuple(Layer.from_json(x) for x in d.get("layers", ())),
            subgraphs=tuple(Subgraph.from_json(x) for x in d.get("subgraphs", ())),
            fusion_events=tuple(FusionEvent.from_json(x) for x in d.get("fusion_events", ())),
            layer_counts=tuple((str(a), int(b)) for a, b in d.get("layer_counts", ())),
            memory=Memory.from_json(d.get("memory", {})),
            timings=dict(d.get("timings", {})),
            messages=tuple(Message.from_json(x) for x in d.get("messages", ())),
            calibration=tuple(d.get("calibration", ())),
            backend=d.get("backend"),
            backend_version=d.get("backend_version"),
            origins_exact=d.get("origins_exact", True),
            unparsed_lines=d.get("unparsed_lines", 0),
            total_lines=d.get("total_lines", 0),
            schema=schema,
            bindings=tuple(d.get("bindings", ())),
            removed_layers=tuple(d.get("removed_layers", ())),
            tool=d.get("tool"),
            tool_version=d.get("tool_version"),
            result=d.get("result"),
            precision_flags=d.get("precision_flags"),
            engine_size_mib=d.get("engine_size_mib"),
            quantization=dict(d.get("quantization", {})),
            builds=int(d.get("builds", 1)),
        )

    @classmethod
    def from_json(cls, text: str) -> BuildRecord:
        return cls.from_dict(json.loads(text))


def _plain(obj: Any) -> Any:
    """What ``dataclasses.asdict`` gives for a record, without its deep copies.

    asdict deep-copies every leaf; a record's leaves are str, int, float, bool and None,
    so only the containers are rebuilt here (the bundle's build.json serialises a
    record for every engine of every session).
    """
    cls = type(obj)
    if cls in _LEAVES:
        return obj
    names = _FIELDS.get(cls)
    if names is None and is_dataclass(obj) and not isinstance(obj, type):
        names = _FIELDS[cls] = tuple(f.name for f in fields(obj))
    if names is not None:
        return {name: _plain(getattr(obj, name)) for name in names}
    if cls is tuple or cls is list:
        return cls(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return {_plain(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple, as asdict rebuilds it
        return cls(*(_plain(x) for x in obj))
    if isinstance(obj, (list, tuple)):
        return cls(_plain(x) for x in obj)
    return obj


_LEAVES = frozenset((str, int, float, bool, type(None)))
_FIELDS: dict[type, tuple[str, ...]] = {}
