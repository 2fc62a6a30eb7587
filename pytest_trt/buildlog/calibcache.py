"""INT8 calibration evidence: the calibration cache file, and the calibration lines of a build log.

Reading, writing (byte-identical round trip) and comparing caches, and the
typed facts of a log's calibration lines, live here; producing ranges lives
in :mod:`pytest_trt.calibration`.

Cache format (TensorRT 6 .. 10; implicit-INT8 calibrators are gone in 11.x, NOTES §9)::

    TRT-8601-EntropyCalibration2        version tag (4 digits up to 8.x, 6 in 10.x) and algorithm
    onnx::Cast_0: 4000890a              tensor name (may hold ":" and spaces), big-endian float32 scale
    (Unnamed Layer* 1) [Constant]_output: 0
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildFailed, CalibrationCacheError, ConfigError, LogParseError

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


def parse_calibration_cache(text: str, *, strict: bool = False, path: str = "<calibration cache>") -> CalibrationCache:
    """Parse the text of a cache.

    Lenient (default, for evidence from other tools): lines that are not ``name: value`` are counted, never
    fatal.  ``strict=True`` (a cache a build will use): a bad header or line raises
    :class:`CalibrationCacheError` naming the file and the line number.
    """
    lines = text.splitlines()
    header = lines[0].strip() if lines else ""
    m = _HEADER_RE.match(header)
    if strict and m is None:
        raise CalibrationCacheError(
            f"{path}:1: calibration cache header {header[:80]!r} is not like 'TRT-8601-EntropyCalibration2'; "
            "the file is not a TensorRT calibration cache (delete it to recalibrate)", path=path, line=1)
    raw: dict[str, str] = {}
    scales: dict[str, float] = {}
    bad = 0
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        key, sep, value = line.rpartition(": ")  # keys contain ": " never at the end, values never
        scale = _scale(value.strip()) if sep else None
        if scale is None:
            if strict:
                raise CalibrationCacheError(
                    f"{path}:{number}: {line[:120]!r} is not '<tensor>: <8 hex digits of a big-endian float32 "
                    "scale>'; the cache is corrupt or hand-edited (delete it to recalibrate)", path=path, line=number)
            bad += 1
            continue
        raw[key] = value.strip()
        scales[key] = scale
    from .dialects import version_from_tag  # here: the dialect patterns are compiled only when a cache is read

    return CalibrationCache(
        header=header,
        version_tag=m["tag"] if m else None,
        trt_version=version_from_tag(m["tag"]) if m else None,
        calibrator=m["algo"] if m else None,
        raw=raw,
        scales=scales,
        unparsed_lines=bad + (0 if m else 1),
    )


def read_calibration_cache(path: str | Path, *, strict: bool = False) -> CalibrationCache:
    """Read a calibration cache file; a missing or unreadable file raises LogParseError."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise LogParseError(f"cannot read calibration cache {p}: {e.strerror or e}", path=str(p)) from e
    return parse_calibration_cache(text, strict=strict, path=str(p))


#: Calibration.algorithm -> the algorithm word of the cache header.  The first four are TensorRT's
#: calibrators; percentile and distribution are pytest-trt's explicit methods (no TensorRT calibrator).
HEADER_ALGORITHMS = {
    "entropy2": "EntropyCalibration2",
    "entropy": "EntropyCalibration",
    "minmax": "MinMaxCalibration",
    "legacy": "LegacyCalibration",
    "percentile": "PercentileCalibration",
    "distribution": "DistributionCalibration",
}
#: Version tag of caches pytest-trt writes from explicit ranges (no TensorRT calibrator wrote them).
EXPLICIT_TAG = "0000"


def algorithm_of_header(header: str | None) -> str | None:
    """``TRT-8601-EntropyCalibration2`` (or just ``EntropyCalibration2``) -> ``entropy2``; None if unknown."""
    if not header:
        return None
    m = _HEADER_RE.match(header)
    word = m["algo"] if m else header.strip()
    for algorithm, name in HEADER_ALGORITHMS.items():
        if name == word:
            return algorithm
    return None


def version_tag(version: str) -> str:
    """TensorRT version -> cache tag: ``8.6.1`` -> ``8601``, ``10.14.1`` -> ``101401``."""
    parts = [int(p) for p in (version.split(".") + ["0", "0"])[:3]]
    if parts[0] >= 10:
        return f"{parts[0]}{parts[1]:02d}{parts[2]:02d}"
    return f"{parts[0] * 1000 + parts[1] * 100 + parts[2]:04d}"


def scale_hex(scale: float) -> str:
    """A scale as TensorRT writes it: 8 lowercase hex digits of the big-endian float32."""
    return struct.pack(">f", scale).hex()


def render_calibration_cache(header: str, values: Iterable[tuple[str, str]]) -> str:
    """Cache text: the header line, then ``tensor: value`` lines, each ending in ``\n``."""
    return "".join(f"{line}\n" for line in [header, *(f"{k}: {v}" for k, v in values)])


def format_calibration_cache(algorithm: str, scales: dict[str, float], *, tag: str = EXPLICIT_TAG) -> str:
    """A TensorRT-format cache for ``scales`` (tensor -> amax/127), tensors sorted by name."""
    header = f"TRT-{tag}-{HEADER_ALGORITHMS[algorithm]}"
    return render_calibration_cache(header, ((k, scale_hex(scales[k])) for k in sorted(scales)))


def write_calibration_cache(path: str | Path, text: str) -> None:
    """Write a cache atomically (a reader sees the old file or the whole new one)."""
    from pytest_trt.common.fileio import write_text_atomic

    write_text_atomic(Path(path), text)


def check_cache_pin(config_name: str, got: str, pinned: str | None, *, path: str | Path | None = None) -> None:
    """A calibration cache must hash to the config's pinned ``cache_sha256`` (when one is pinned).

    One rule for TensorRT's implicit calibrators (the file they wrote) and the explicit path (the cache it made).
    """
    if pinned is None or got == pinned:
        return
    what = f"calibration cache {str(path)!r}" if path is not None else "calibration cache"
    raise BuildFailed(
        f"BuildConfig {config_name!r}: {what} sha256 is {got}, the config pins cache_sha256={pinned}. The "
        "calibration data, algorithm or quantizer changed; compare the caches (pytest_trt.calibration.compare_caches) "
        "and, if the new scales are approved, pin the new hash.",
        config_name=config_name, stage="calibration", obtained=got, expected=pinned)


def refuse_directory(config_name: str, path: Path) -> None:
    """``Calibration(cache=...)`` names a file: a directory there is a clear error, not an IsADirectoryError."""
    if path.is_dir():
        raise ConfigError(f"BuildConfig {config_name!r}: Calibration.cache {str(path)!r} is a directory; give the "
                          f"path of the cache file, like {str(path / 'calibration.cache')!r}",
                          field="calibration.cache")


def sync_cache_file(config_name: str, path: str | Path | None, text: str, pinned: str | None) -> None:
    """Check ``text`` against the pinned ``cache_sha256``, then write it to the pinned cache path.

    The file is left alone when it holds these bytes already; without a path nothing is written.
    """
    target = Path(path) if path is not None else None
    if target is not None:
        refuse_directory(config_name, target)
    check_cache_pin(config_name, hashlib.sha256(text.encode("utf-8")).hexdigest(), pinned)
    if target is not None and (not target.is_file() or target.read_bytes() != text.encode("utf-8")):
        write_calibration_cache(target, text)


def rewrite(cache: CalibrationCache) -> str:
    """The text of a parsed cache, values exactly as they were written (byte-identical for a well-formed file)."""
    return render_calibration_cache(cache.header, cache.raw.items())


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


# -- comparing two caches --------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheComparison:
    """How cache ``b`` differs from cache ``a``: header, tensors added or missing, per-tensor scale ratios."""

    header_a: str
    header_b: str
    added: tuple[str, ...]  # in b, not in a
    missing: tuple[str, ...]  # in a, not in b
    ratios: dict[str, float]  # tensor in both -> scale_b / scale_a (inf when a's scale is 0 and b's is not)

    @property
    def algorithm_changed(self) -> bool:
        return _HEADER_RE.sub(r"\g<algo>", self.header_a) != _HEADER_RE.sub(r"\g<algo>", self.header_b)

    @property
    def version_changed(self) -> bool:
        ma, mb = _HEADER_RE.match(self.header_a), _HEADER_RE.match(self.header_b)
        return (ma["tag"] if ma else None) != (mb["tag"] if mb else None)

    def changed(self, *, rtol: float = 0.0) -> dict[str, float]:
        """Tensors whose scale ratio differs from 1 by more than ``rtol``."""
        return {k: r for k, r in self.ratios.items() if not abs(r - 1.0) <= rtol}

    def identical(self, *, rtol: float = 0.0) -> bool:
        return not (self.added or self.missing or self.changed(rtol=rtol) or self.header_a != self.header_b)

    def describe(self, *, rtol: float = 0.0, limit: int = 10) -> str:
        """A human summary, the largest ratios first, capped at ``limit`` tensors."""
        lines = []
        if self.header_a != self.header_b:
            what = [w for w, c in (("algorithm", self.algorithm_changed), ("version", self.version_changed)) if c]
            lines.append(f"header: {self.header_a} -> {self.header_b} ({' and '.join(what) or 'header'} changed)")
        for title, names in (("added", self.added), ("missing", self.missing)):
            if names:
                shown = ", ".join(names[:limit]) + (f" ... and {len(names) - limit} more" if len(names) > limit else "")
                lines.append(f"{len(names)} tensor(s) {title}: {shown}")
        changed = sorted(self.changed(rtol=rtol).items(), key=lambda kv: -abs(_log_ratio(kv[1])))
        if changed:
            lines.append(f"{len(changed)} of {len(self.ratios)} common tensor scales differ (rtol={rtol}):")
            lines += [f"  {name}: scale x{ratio:.4g}" for name, ratio in changed[:limit]]
            if len(changed) > limit:
                lines.append(f"  ... and {len(changed) - limit} more tensors with changed scales (not shown)")
        return "\n".join(lines) or "identical"


def _log_ratio(r: float) -> float:
    import math

    return math.inf if r in (0.0, math.inf) else abs(math.log(r))


def compare_caches(a: CalibrationCache | str | Path, b: CalibrationCache | str | Path) -> CacheComparison:
    """Compare two calibration caches (parsed, or paths read strictly)."""
    ca = a if isinstance(a, CalibrationCache) else read_calibration_cache(a, strict=True)
    cb = b if isinstance(b, CalibrationCache) else read_calibration_cache(b, strict=True)
    ratios: dict[str, float] = {}
    for name in ca.scales.keys() & cb.scales.keys():
        sa, sb = ca.scales[name], cb.scales[name]
        ratios[name] = 1.0 if sa == sb else (sb / sa if sa else float("inf"))
    return CacheComparison(
        header_a=ca.header,
        header_b=cb.header,
        added=tuple(k for k in cb.scales if k not in ca.scales),
        missing=tuple(k for k in ca.scales if k not in cb.scales),
        ratios=dict(sorted(ratios.items())),
    )
