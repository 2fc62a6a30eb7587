"""Calibration assertions on a :class:`BuildRecord`: one definition each (``@record_assertion``), see :mod:`.registry`.

Evidence comes from two places: ``record.quantization`` (what pytest-trt's
quantizer or calibrator did: algorithm, cache header, ranges, class counts)
and the log's calibration lines (``record.calibration_facts``: the
calibrator named in "Writing Calibration Cache for calibrator: TRT-8601-...",
out-of-bound layers, missing scales).  Every source must agree: a build whose
quantizer says entropy while its cache header says MinMax fails, whatever
algorithm was asked for.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .calibcache import HEADER_ALGORITHMS, algorithm_of_header
from .matching import describe, layers_with, resolve_nodes
from .record import BuildRecord
from .registry import Subject, record_assertion, subject_label

if TYPE_CHECKING:
    from typing_extensions import Unpack

MAX_SHOWN = 10


def _algorithm(name: str) -> str:
    if name in HEADER_ALGORITHMS:
        return name
    found = algorithm_of_header(name)
    if found is None:
        raise ValueError(f"unknown calibration algorithm {name!r}; use one of {', '.join(HEADER_ALGORITHMS)} "
                         f"(or a cache header word like 'EntropyCalibration2')")
    return found


def calibration_evidence(record: BuildRecord) -> list[tuple[str, str, str | None]]:
    """(source, what it says verbatim, algorithm) for every piece of calibration evidence in ``record``."""
    q = record.quantization
    out: list[tuple[str, str, str | None]] = []
    if q.get("algorithm"):
        who = q.get("calibrator") or q.get("quantizer") or "pytest-trt"
        out.append((f"{q.get('mode', 'pytest-trt')} quantizer/calibrator", str(who), str(q["algorithm"])))
    if q.get("cache_header"):
        out.append(("calibration cache header", str(q["cache_header"]), algorithm_of_header(str(q["cache_header"]))))
    facts = record.calibration_facts
    if facts.cache_header or facts.calibrator:
        said = facts.cache_header or facts.calibrator or ""
        out.append(("build log calibrator line", said, algorithm_of_header(said)))
    return out


@record_assertion
def assert_calibration(record: BuildRecord, algorithm: str, **on: Unpack[Subject]) -> None:
    """The build was calibrated with ``algorithm``, by every piece of evidence, which must all agree."""
    __tracebackhide__ = True
    label = subject_label(on)
    want = _algorithm(algorithm)
    evidence = calibration_evidence(record)
    shown = "\n".join(f"  {src}: {said!r} -> {alg or 'unknown algorithm'}" for src, said, alg in evidence)
    if not evidence:
        raise AssertionError(
            f"{label}: expected INT8 calibration with {want!r}, but the build record holds no calibration evidence "
            f"(no pytest-trt calibration, no calibrator line in the log; {len(record.calibration)} calibration "
            "lines).\nNext: pin Calibration(algorithm=...) in the BuildConfig, or capture the log at INFO level so "
            "the 'Calibration Cache for calibrator' line is kept.")
    algorithms = {alg for _, _, alg in evidence}
    if len(algorithms) > 1:
        raise AssertionError(
            f"{label}: the calibration evidence disagrees (expected {want!r}):\n{shown}\n"
            "Next: a cache written by another algorithm was used or kept; delete the calibration cache and "
            "rebuild, then pin its cache_sha256.")
    got = algorithms.pop()
    if got != want:
        raise AssertionError(
            f"{label}: expected INT8 calibration with {want!r} ({HEADER_ALGORITHMS[want]}), got {got!r}:\n{shown}\n"
            "Next: an upgrade or a config change switched the calibrator; accuracy must be re-checked against the "
            "golden outputs before this engine is approved, or pin the approved algorithm again.")


def _ranges(record: BuildRecord, label: str) -> Mapping[str, Any]:
    ranges = record.quantization.get("ranges") or {}
    if not ranges:
        raise AssertionError(
            f"{label}: the build record holds no calibration ranges (only builds calibrated by pytest-trt record "
            "them).\nNext: pin Calibration(...) in the BuildConfig, or assert on the calibration cache.")
    return dict(ranges)


@record_assertion
def assert_dynamic_range(
    record: BuildRecord, tensor: str, *, max_abs: float | None = None, min_abs: float | None = None,
    **on: Unpack[Subject],
) -> None:
    """The calibrated range of ``tensor`` (name or glob) has amax = max(|low|, |high|) within the bounds.

    A layer the log reports with "dynamic range out of bound" fails too.
    """
    __tracebackhide__ = True
    label = subject_label(on)
    bad_layers = [n for n in record.calibration_facts.out_of_bound_layers if fnmatch.fnmatchcase(n, tensor)
                  or tensor in n]
    if bad_layers:
        raise AssertionError(
            f"{label}: the build log reports 'dynamic range out of bound' for {', '.join(map(repr, bad_layers))}.\n"
            "Next: the calibration set lacks samples that reach this layer's range (long-tail inputs); add them "
            "and recalibrate.")
    ranges = _ranges(record, label)
    names = [n for n in ranges if n == tensor or fnmatch.fnmatchcase(n, tensor)]
    if not names:
        close = sorted(ranges, key=lambda n: (tensor not in n, n))[:5]
        raise AssertionError(f"{label}: no calibrated tensor matches {tensor!r}; some of the "
                             f"{len(ranges)} calibrated tensors: {', '.join(map(repr, close))}")
    wrong = []
    for name in names:
        lo, hi = ranges[name]
        amax = max(abs(float(lo)), abs(float(hi)))
        if (max_abs is not None and amax > max_abs) or (min_abs is not None and amax < min_abs):
            wrong.append(f"  {name}: range [{float(lo):.6g}, {float(hi):.6g}], amax {amax:.6g}")
    if wrong:
        bounds = " and ".join(b for b in (f"<= {max_abs}" if max_abs is not None else "",
                                          f">= {min_abs}" if min_abs is not None else "") if b)
        more = f"\n  ... and {len(wrong) - MAX_SHOWN} more" if len(wrong) > MAX_SHOWN else ""
        raise AssertionError(
            f"{label}: expected calibrated amax {bounds} for {tensor!r}; {len(wrong)} of {len(names)} tensor(s) "
            f"outside ({record.quantization.get('algorithm')} ranges):\n" + "\n".join(wrong[:MAX_SHOWN]) + more +
            "\nNext: outliers in the calibration data widen min-max ranges; check the data or the algorithm.")


def _int8(layer: Any) -> bool:
    return any(t.dtype == "Int8" for t in (*layer.inputs, *layer.outputs)) or layer.precision == "Int8"


@record_assertion
def assert_int8(record: BuildRecord, *nodes: str, **on: Unpack[Subject]) -> None:
    """Each ONNX node (name, glob or ``re:``) is implemented by a compute layer reading or writing INT8."""
    __tracebackhide__ = True
    label = subject_label(on)
    if not nodes:
        raise TypeError("assert_int8 needs at least one node name")
    failures = []
    for pattern in nodes:
        for name in resolve_nodes(record, pattern, label=label):
            layers = [la for la in layers_with(record, [name]) if la.kind == "compute"]
            if not any(_int8(la) for la in layers):
                failures.append((name, layers))
    if failures:
        parts = [f"  {name!r} implemented by:\n{describe(layers)}" for name, layers in failures[:MAX_SHOWN]]
        raise AssertionError(
            f"{label}: expected INT8 execution, but {len(failures)} node(s) have no layer reading or writing Int8:\n"
            + "\n".join(parts) + "\nNext: a missing Q/DQ pair or scale makes TensorRT fall back to float; check "
            "record.calibration_facts.missing_scales and the Q/DQ placement.")


@record_assertion
def assert_calibration_coverage(
    record: BuildRecord, *, min_per_class: int, classes: Iterable[int] | None = None, **on: Unpack[Subject]
) -> None:
    """Each class has at least ``min_per_class`` calibration samples.

    ``classes``: the classes that must be covered, e.g. the golden dataset's labels (default: every class
    seen in the calibration labels).
    """
    __tracebackhide__ = True
    label = subject_label(on)
    counts_raw = record.quantization.get("class_counts")
    if not counts_raw:
        raise AssertionError(
            f"{label}: the calibration set has no labels, so its coverage per class is unknown.\n"
            "Next: give the calibration data a 'labels' array (npz key, HDF5 dataset or GoldenDataset labels).")
    counts = {int(k): int(v) for k, v in counts_raw.items()}
    wanted = sorted({int(c) for c in classes}) if classes is not None else sorted(counts)
    short = [(c, counts.get(c, 0)) for c in wanted if counts.get(c, 0) < min_per_class]
    if short:
        shown = ", ".join(f"class {c}: {n}" for c, n in short[:MAX_SHOWN])
        more = f" ... and {len(short) - MAX_SHOWN} more" if len(short) > MAX_SHOWN else ""
        raise AssertionError(
            f"{label}: expected >= {min_per_class} calibration samples per class; {len(short)} of {len(wanted)} "
            f"classes fall short ({shown}{more}); the set has {sum(counts.values())} samples.\n"
            "Next: add samples of those classes (long-tail inputs too) to the calibration data and recalibrate.")
