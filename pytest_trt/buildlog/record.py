"""BuildRecord: the structured facts of one engine build.

Every reader (live TensorRT / TensorRT-RTX logs, trtexec logs of TensorRT 7
to 10, IEngineInspector / ``--exportLayerInfo`` JSON, ONNX Runtime optimized
graphs) produces this one type, so assertions and diffs work the same on all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .calibfacts import CalibrationFacts

RECORD_SCHEMA = 1

#: canonical precision names (TensorRT's own spelling of data types)
DTYPES = ("Float", "Half", "BFloat16", "Int8", "FP8", "Int4", "FP4", "Int32", "Int64", "Bool", "UInt8")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...] = ()
    dtype: str | None = None  # one of DTYPES when known
    format: str | None = None  # e.g. "Row major linear FP32", "Half[-1,1:2,28,28]" vectorization

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorInfo:
        return cls(d["name"], tuple(d.get("dims", ())), d.get("dtype"), d.get("format"))


@dataclass(frozen=True)
class Layer:
    """One engine layer (for Myelin engines: one kernel of the detailed listing)."""

    name: str
    type: str
    origins: tuple[str, ...] = ()  # ONNX node names this layer implements, in order
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    tactic: str | None = None  # tactic name, or "0x..." value
    precision: str | None = None  # dtype of the first output, one of DTYPES
    kind: str = "compute"  # "compute", "reformat" (reformat/copy), "helper" (TensorRT-internal)
    subgraph: str | None = None  # enclosing {ForeignNode[...]} when known

    @property
    def is_fusion(self) -> bool:
        return self.kind == "compute" and len(set(self.origins)) >= 2

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Layer:
        return cls(
            name=d["name"],
            type=d["type"],
            origins=tuple(d.get("origins", ())),
            inputs=tuple(TensorInfo.from_json(t) for t in d.get("inputs", ())),
            outputs=tuple(TensorInfo.from_json(t) for t in d.get("outputs", ())),
            tactic=d.get("tactic"),
            precision=d.get("precision"),
            kind=d.get("kind", "compute"),
            subgraph=d.get("subgraph"),
        )


@dataclass(frozen=True)
class Subgraph:
    """A Myelin ``{ForeignNode[first...last]}`` and the ONNX nodes it holds."""

    name: str
    origins: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Subgraph:
        return cls(d["name"], tuple(d.get("origins", ())))


@dataclass(frozen=True)
class FusionEvent:
    """A fusion-pass log line: ``ConvReluFusion: Fusing conv1 with relu1``."""

    pass_name: str | None  # None for the bare 7.x form
    first: str
    second: str
    kind: str = "vertical"  # "horizontal" for the 7.x ``Merging layers: A || B``

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FusionEvent:
        return cls(d.get("pass_name"), d["first"], d["second"], d.get("kind", "vertical"))


@dataclass(frozen=True)
class Message:
    severity: str  # "WARNING", "ERROR", "INTERNAL_ERROR"
    text: str

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Message:
        return cls(d["severity"], d["text"])


@dataclass(frozen=True)
class Memory:
    """Bytes unless the name says MiB; None when the log did not state it."""

    activation: int | None = None
    weights: int | None = None
    scratch: int | None = None
    host_persistent: int | None = None
    device_persistent: int | None = None
    peak_cpu_mib: int | None = None
    peak_gpu_mib: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Memory:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


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
    #: ranges, class counts), see :func:`pytest_trt.calibration.quantization_facts`; empty otherwise
    quantization: dict[str, Any] = field(default_factory=dict)

    # -- derived facts -------------------------------------------------
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
        )

    @classmethod
    def from_json(cls, text: str) -> BuildRecord:
        return cls.from_dict(json.loads(text))

    # -- from existing artifacts ---------------------------------------------
    @classmethod
    def from_log(cls, path: str | Path, onnx: Any = None) -> BuildRecord:
        """Parse a TensorRT build log (trtexec, polygraphy, python logger or ``build.log``)."""
        from .parser import read_log  # local: the parser imports this module

        return read_log(path, onnx=onnx)

    @classmethod
    def from_layer_json(cls, path: str | Path) -> BuildRecord:
        """Read ``trtexec --exportLayerInfo`` / IEngineInspector JSON (8.x to 11.x schemas, names-only too)."""
        from .layerjson import read_layer_json

        return read_layer_json(path)


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
