"""Which ONNX IR versions and opsets each backend's parser supports, and a check before parsing.

TensorRT-RTX 1.7 parses a model that declares IR version 99 or opset 99 without a word
(measured: ``OnnxParser.parse`` returns True and builds an engine), so a model from a
newer exporter would be compiled with whatever semantics the parser assumes.  ONNX
Runtime refuses such models itself; its limits are listed for the record.

The limits are data, one row per backend release (STYLE: versions as data).  For a
release not in the table the only sound bound is the newest IR/opset that the
installed ``onnx`` package defines: no released exporter can write anything newer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True)
class OnnxLimits:
    max_ir: int
    max_opset: int
    source: str


#: (module, "major.minor") -> the newest IR version and default-domain opset its parser knows.
ONNX_LIMITS: dict[tuple[str, str], OnnxLimits] = {
    # Read from the parser library (libtensorrt_onnxparser_rtx.so.1) by hand: its compiled ONNX proto's enum
    # Version ends at IR_VERSION_2025_08_26 = IR_VERSION = 12, the proto of ONNX 1.19, whose newest opset is 24.
    ("tensorrt_rtx", "1.7"): OnnxLimits(12, 24, "tensorrt_rtx 1.7 parser: ONNX 1.19 proto (IR 12, opset 24)"),
    # Same reading for 1.4.0.76: the embedded descriptor ends at IR_VERSION_2024_3_25 = 10, IR_VERSION = 11
    # (ONNX 1.18's IR, opset 23); its op table has RMSNormalization, an opset-23 operator.
    ("tensorrt_rtx", "1.4"): OnnxLimits(11, 23, "tensorrt_rtx 1.4 parser: ONNX 1.18 proto (IR 11, opset 23)"),
    # TensorRT 11.x support matrix / ONNX opset guide: ONNX 1.20.0, maximum opset 25.
    ("tensorrt", "11"): OnnxLimits(13, 25, "TensorRT 11.x ONNX opset guide (ONNX 1.20.0)"),
    # Measured here: onnxruntime 1.32 loads IR 14 / opset 28 and refuses IR 15 and opset 29 itself.
    ("onnxruntime", "1.32"): OnnxLimits(14, 28, "onnxruntime 1.32 (measured)"),
}


def limits_for(module: str, version: str) -> OnnxLimits:
    """The row for ``module`` at ``version`` ("1.7.1.116" matches "1.7", "11.4.0" matches "11")."""
    parts = version.split(".")
    for key in (".".join(parts[:2]), parts[0]):
        row = ONNX_LIMITS.get((module, key))
        if row is not None:
            return row
    import onnx  # only for releases the table does not list

    return OnnxLimits(
        int(onnx.IR_VERSION),
        int(onnx.defs.onnx_opset_version()),
        f"no table row for {module} {version}: bounded by the installed onnx {onnx.__version__}",
    )


# -- reading the two numbers without loading the model -------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """Top-level (field number, wire type, value) of a protobuf message; raises ValueError when malformed."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            out.append((number, wire, value))
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ValueError("truncated field")
            out.append((number, wire, buf[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


@dataclass(frozen=True)
class OnnxHeader:
    ir_version: int
    opset: int | None  # the default ("" / "ai.onnx") domain's newest imported version; None when not imported


def _read_varint(fh: BinaryIO) -> int | None:
    """The next varint of ``fh``; None at a clean end of file; raises ValueError when truncated."""
    value = shift = 0
    while True:
        byte = fh.read(1)
        if not byte:
            if shift:
                raise ValueError("truncated varint")
            return None
        if shift > 63:
            raise ValueError("varint too long")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7


def _top_fields(fh: BinaryIO, size: int, wanted: frozenset[int]) -> list[tuple[int, int, int | bytes]]:
    """Top-level fields of the message in ``fh``: varints, and the bytes of the ``wanted`` length-delimited ones.

    Other length-delimited fields (the graph: nearly the whole file) are skipped with a seek, not read.
    """
    out: list[tuple[int, int, int | bytes]] = []
    while True:
        tag = _read_varint(fh)
        if tag is None:
            return out
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value = _read_varint(fh)
            if value is None:
                raise ValueError("truncated field")
            out.append((number, wire, value))
        elif wire == 2:
            length = _read_varint(fh)
            if length is None or fh.tell() + length > size:
                raise ValueError("truncated field")
            if number in wanted:
                out.append((number, wire, fh.read(length)))
            else:
                fh.seek(length, 1)
        elif wire in (1, 5):
            fh.seek(8 if wire == 1 else 4, 1)
        else:
            raise ValueError(f"wire type {wire}")


def read_header(path: Path) -> OnnxHeader | None:
    """IR version and default-domain opset of the ModelProto at ``path``; None when it is not one.

    Walks the top-level protobuf fields (ModelProto.ir_version = 1, opset_import = 8;
    OperatorSetIdProto.domain = 1, version = 2), seeking over the graph: a 14 MB model costs
    a few small reads, not a read and a copy of the whole file.
    """
    try:
        with open(path, "rb") as fh:
            fields = _top_fields(fh, os.fstat(fh.fileno()).st_size, frozenset({8}))
    except (OSError, ValueError):
        return None
    ir = next((v for n, w, v in fields if n == 1 and w == 0 and isinstance(v, int)), None)
    if ir is None:
        return None
    opset = None
    for number, wire, value in fields:
        if number != 8 or wire != 2 or not isinstance(value, bytes):
            continue
        try:
            sub = _fields(value)
        except ValueError:
            continue
        domain = next((v for n, w, v in sub if n == 1 and isinstance(v, bytes)), b"")
        version = next((v for n, w, v in sub if n == 2 and isinstance(v, int)), None)
        if domain in (b"", b"ai.onnx") and version is not None:  # two spellings of one domain: the newest counts
            opset = version if opset is None else max(opset, version)
    return OnnxHeader(ir, opset)


def unsupported_reason(path: Path, *, module: str, version: str, product: str) -> str | None:
    """Why ``product``'s parser cannot be trusted with the model at ``path``, or None."""
    header = read_header(path)
    if header is None:
        return None  # not a ModelProto: the parser reports that itself
    row = limits_for(module, version)
    too_new = header.ir_version > row.max_ir or (header.opset is not None and header.opset > row.max_opset)
    if not too_new:
        return None
    return (
        f"{path} declares ONNX IR version {header.ir_version} and opset {header.opset}; "
        f"{product} {version} parses IR version <= {row.max_ir} and opset <= {row.max_opset} ({row.source}). "
        "Re-export with an older opset (torch.onnx.export(..., opset_version=N)) or convert it with "
        "onnx.version_converter.convert_version and set model.ir_version accordingly."
    )
