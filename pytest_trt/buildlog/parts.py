"""The parts a :class:`~pytest_trt.buildlog.record.BuildRecord` is made of: layers, tensors, events, messages.

Kept apart from the record so that the listing parsers and a stored record's readers build them
without the record module (reading a stored record loads only these two and the schema).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
