"""INT8 calibration evidence: the calibration cache file, and the calibration lines of a build log.

Cache format (TensorRT 6 .. 10; implicit-INT8 calibrators are gone in 11.x, NOTES §9)::

    TRT-8601-EntropyCalibration2        version tag (4 digits up to 8.x, 6 in 10.x) and algorithm
    onnx::Cast_0: 4000890a              tensor name (may hold ":" and spaces), big-endian float32 scale
    (Unnamed Layer* 1) [Constant]_output: 0
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LogParseError
from .dialects import version_from_tag

_HEADER_RE = re.compile(r"TRT-(?P<tag>\d{4,6})-(?P<algo>\w+)$")


@dataclass(frozen=True)
class CalibrationCache:
    """A parsed calibration cache; ``scales`` are amax/127 per tensor."""

    header: str
    version_tag: str | None
    trt_version: str | None
    calibrator: str | None
    raw: dict[str, str] = field(default_factory=dict)  # tensor -> value as written
    scales: dict[str, float] = field(default_factory=dict)
    unparsed_lines: int = 0


def _scale(value: str) -> float | None:
    if value == "0":  # written as a bare 0 (calib_trt8.6.1_entropy2_yolo_gazesam.cache)
        return 0.0
    try:
        return float(struct.unpack(">f", bytes.fromhex(value))[0])
    except (ValueError, struct.error):  # not hex, or not exactly 4 bytes of it
        return None


def parse_calibration_cache(text: str) -> CalibrationCache:
    """Parse the text of a cache; lines that are not ``name: value`` are counted, never fatal."""
    lines = text.splitlines()
    header = lines[0].strip() if lines else ""
    m = _HEADER_RE.match(header)
    raw: dict[str, str] = {}
    scales: dict[str, float] = {}
    bad = 0
    for line in lines[1:]:
        if not line.strip():
            continue
        key, sep, value = line.rpartition(": ")  # keys contain ": " never at the end, values never
        scale = _scale(value.strip()) if sep else None
        if scale is None:
            bad += 1
            continue
        raw[key] = value.strip()
        scales[key] = scale
    return CalibrationCache(
        header=header,
        version_tag=m["tag"] if m else None,
        trt_version=version_from_tag(m["tag"]) if m else None,
        calibrator=m["algo"] if m else None,
        raw=raw,
        scales=scales,
        unparsed_lines=bad + (0 if m else 1),
    )


def read_calibration_cache(path: str | Path) -> CalibrationCache:
    """Read a calibration cache file; a missing or unreadable file raises LogParseError."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise LogParseError(f"cannot read calibration cache {p}: {e.strerror or e}", path=str(p)) from e
    return parse_calibration_cache(text)


# -- calibration lines of a build log -------------------------------------------------------------

_BATCH_SIZE_RE = re.compile(r"Starting Calibration with batch size (\d+)")
_BATCH_RE = re.compile(r"Calibrated batch (\d+) in ([\d.eE+-]+) seconds")
_POST_RE = re.compile(r"Post Processing Calibration data in ([\d.eE+-]+) seconds")
_DONE_RE = re.compile(r"Calibration completed in ([\d.eE+-]+) seconds")
_CACHE_RE = re.compile(r"(?:Writing|Reading) Calibration Cache for calibrator: (?P<h>\S+)")


@dataclass(frozen=True)
class CalibrationLog:
    """Facts of the calibration lines kept in ``BuildRecord.calibration``."""

    batch_size: int | None = None
    batch_times_s: dict[int, float] = field(default_factory=dict)
    post_processing_s: float | None = None
    completed_s: float | None = None
    cache_header: str | None = None  # "TRT-7000-EntropyCalibration2" (DeepStream prints only the algorithm)
    calibrator: str | None = None


def summarize_calibration(lines: Iterable[str]) -> CalibrationLog:
    """Read ``BuildRecord.calibration`` lines (7.0 samples logger, 8.6 python logger shapes)."""
    size = post = done = None
    header = algo = None
    batches: dict[int, float] = {}
    for line in lines:
        if (m := _BATCH_SIZE_RE.search(line)) is not None:
            size = int(m.group(1))
        elif (m := _BATCH_RE.search(line)) is not None:
            batches[int(m.group(1))] = float(m.group(2))
        elif (m := _POST_RE.search(line)) is not None:
            post = float(m.group(1))
        elif (m := _DONE_RE.search(line)) is not None:
            done = float(m.group(1))
        elif (m := _CACHE_RE.search(line)) is not None:
            header = m["h"]
            hm = _HEADER_RE.match(header)
            algo = hm["algo"] if hm else header
    return CalibrationLog(size, batches, post, done, header, algo)
