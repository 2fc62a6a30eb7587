"""Typed facts of the INT8 calibration lines and warnings of a build log.

Calibrator not used, cache read / written / rejected, "layer 'embed_3' has
dynamic range out of bound", tensors with no scale: each becomes a field of
:class:`CalibrationFacts` (``BuildRecord.calibration_facts``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .calibcache import algorithm_of_header, summarize_calibration

# "Calibrator won't be used in explicit precision mode." (TensorRT 8.2, NVIDIA/TensorRT#1837);
# "Calibrator is not being used. Users must provide dynamic range ..." (TensorRT 10, pytorch/TensorRT#3362)
_NOT_USED_RE = re.compile(r"[Cc]alibrator (?:won't|will not) be used|[Cc]alibrator is not (?:being )?used")
# "Calibration failure occurred with no scaling factors detected." (tensorflow/tensorrt#119)
_FAILED_RE = re.compile(r"Calibration failure occurred|no scaling factors detected")
_CACHE_BAD_RE = re.compile(
    r"[Cc]alibration [Cc]ache.*(?:ignored|incompatible|invalid|mismatch|failed)|"
    r"(?:[Ii]gnoring|[Ii]ncompatible|[Ii]nvalid).*[Cc]alibration [Cc]ache")
_OUT_OF_BOUND_RE = re.compile(r"layer '?(?P<layer>[^']+?)'? has dynamic range out of bound")
_MISSING_SCALE_RE = re.compile(r"Missing scale and zero-point for tensor (?P<tensor>.+?), expect fall back")
_CACHE_USED_RE = re.compile(r"Generated calibration scales using calibration cache|Reading Calibration Cache")


@dataclass(frozen=True)
class CalibrationFacts:
    """What a build log says about INT8 calibration, as typed facts."""

    calibrator: str | None = None  # "EntropyCalibration2" from the cache line
    cache_header: str | None = None
    cache_read: bool = False  # scales came from a cache, not from running the calibrator
    cache_written: bool = False
    calibrator_not_used: tuple[str, ...] = ()  # the lines saying so
    cache_rejected: tuple[str, ...] = ()  # cache ignored / incompatible lines
    out_of_bound_layers: tuple[str, ...] = ()  # "layer 'embed_3' has dynamic range out of bound"
    missing_scales: tuple[str, ...] = ()  # tensors without a scale (fall back to non-INT8)
    failures: tuple[str, ...] = ()  # "Calibration failure occurred with no scaling factors detected"
    batches: int = 0

    @property
    def algorithm(self) -> str | None:
        return algorithm_of_header(self.cache_header or self.calibrator)


def calibration_facts(lines: Iterable[str]) -> CalibrationFacts:
    """Typed facts of calibration lines and warnings (give it the record's calibration lines and messages)."""
    summary_lines: list[str] = []
    not_used: list[str] = []
    rejected: list[str] = []
    out_of_bound: list[str] = []
    missing: list[str] = []
    failed: list[str] = []
    read = written = False
    for line in lines:
        summary_lines.append(line)
        if (m := _OUT_OF_BOUND_RE.search(line)) is not None:
            out_of_bound.append(m["layer"])
        elif (m := _MISSING_SCALE_RE.search(line)) is not None:
            missing.append(m["tensor"].strip())
        elif _CACHE_BAD_RE.search(line):
            rejected.append(line.strip())
        elif _NOT_USED_RE.search(line):
            not_used.append(line.strip())
        elif _FAILED_RE.search(line):
            failed.append(line.strip())
        if _CACHE_USED_RE.search(line):
            read = True
        if "Writing Calibration Cache" in line:
            written = True
    s = summarize_calibration(summary_lines)
    return CalibrationFacts(
        calibrator=s.calibrator,
        cache_header=s.cache_header,
        cache_read=read,
        cache_written=written,
        calibrator_not_used=tuple(dict.fromkeys(not_used)),
        cache_rejected=tuple(dict.fromkeys(rejected)),
        out_of_bound_layers=tuple(dict.fromkeys(out_of_bound)),
        missing_scales=tuple(dict.fromkeys(missing)),
        failures=tuple(dict.fromkeys(failed)),
        batches=len(s.batch_times_s),
    )
