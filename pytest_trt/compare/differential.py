"""Differential comparison of an engine's outputs with the reference runner's.

``Engine.assert_matches_reference`` delegates here.  For each output the check
is numpy's ``|got - want| <= atol + rtol * |want|`` element-wise, plus, when
``cosine`` is given, the cosine similarity of the flattened outputs.  A
failure names the output, its shape, the max abs/rel error, the worst
element's index and values, and the tolerance that would have passed, so a
hypothesis-shrunk counterexample reads as a complete bug report.

The max abs error and the cosine are :mod:`pytest_trt.compare.metrics`' figures (those the golden
checks report); the tolerance test, its worst element and the tolerances that would have passed are
this module's, and so is the max rel error, taken against the same floor of ``|reference|`` as ``rtol``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from pytest_trt.compare.metrics import element_stats

__all__ = ["OutputDiff", "compare_outputs", "render_failure"]


@dataclass(frozen=True)
class OutputDiff:
    """How one output of the engine differs from the reference."""

    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...]
    worst_got: float
    worst_want: float
    violations: int
    size: int
    cosine: float | None
    #: smallest atol that passes with the given rtol, and smallest rtol that passes with the given atol
    atol_needed: float
    rtol_needed: float
    passed: bool


def diff_output(name: str, got: np.ndarray, want: np.ndarray, *, rtol: float, atol: float,
                cosine: float | None) -> OutputDiff:
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        raise AssertionError(
            f"output {name!r}: the engine gave shape {g.shape}, the reference {w.shape}; "
            "the engine does not compute the same function (check the model's output shapes and profiles)"
        )
    err = np.abs(g - w)
    finite = np.isfinite(g) & np.isfinite(w)
    err = np.where(finite | (g == w), np.where(finite, err, 0.0), np.inf)  # NaN/inf on one side only: infinite
    bound = atol + rtol * np.abs(w)
    excess = np.where(err > bound, err - bound, 0.0)
    size = int(err.size)
    worst = np.unravel_index(int(np.argmax(excess if excess.any() else err)), err.shape) if size else ()
    rel = err / np.maximum(np.abs(w), np.finfo(np.float64).tiny)
    stats = element_stats(g, w)
    # the metrics leave non-finite elements out; here one differing on either side is an infinite error,
    # and any makes the cosine undefined
    max_abs = float("inf") if np.isinf(err).any() else stats.max_abs
    finite_only = stats.nonfinite_obtained == stats.nonfinite_golden == 0
    atol_needed = float(np.max(err - rtol * np.abs(w))) if size else 0.0
    rtol_needed = float(np.max((err - atol) / np.maximum(np.abs(w), np.finfo(np.float64).tiny))) if size else 0.0
    cos = (stats.cosine if finite_only else float("nan")) if cosine is not None else None
    violations = int(np.count_nonzero(err > bound))
    passed = violations == 0 and (cos is None or cosine is None or cos >= cosine)
    return OutputDiff(
        name=name, shape=tuple(g.shape), max_abs=max_abs, max_rel=float(rel.max()) if size else 0.0,
        worst_index=tuple(int(i) for i in worst), worst_got=float(g[worst]) if size else 0.0,
        worst_want=float(w[worst]) if size else 0.0, violations=violations, size=size, cosine=cos,
        atol_needed=max(atol_needed, 0.0), rtol_needed=max(rtol_needed, 0.0), passed=passed,
    )


def compare_outputs(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], *, rtol: float, atol: float,
                    cosine: float | None) -> list[OutputDiff]:
    """One :class:`OutputDiff` per reference output (a missing engine output is an AssertionError)."""
    missing = sorted(set(want) - set(got))
    if missing:
        raise AssertionError(f"the engine lacks output(s) {missing} that the reference computes")
    return [diff_output(n, got[n], want[n], rtol=rtol, atol=atol, cosine=cosine) for n in sorted(want)]


def _inputs_text(inputs: Mapping[str, np.ndarray]) -> str:
    parts = []
    for name, a in sorted(inputs.items()):
        arr = np.asarray(a)
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size else (0.0, 0.0)
        parts.append(f"{name}: {arr.dtype.name} {tuple(arr.shape)} values {lo:.6g}..{hi:.6g}")
    return "; ".join(parts)


def render_failure(label: str, diffs: list[OutputDiff], inputs: Mapping[str, np.ndarray], *, rtol: float,
                   atol: float, cosine: float | None) -> str:
    lines = [f"{label}: engine differs from the reference runner (ONNX, optimizations off) "
             f"for inputs {_inputs_text(inputs)}"]
    for d in diffs:
        if d.passed:
            continue
        lines.append(
            f"  output {d.name!r} shape {d.shape}: {d.violations}/{d.size} elements beyond atol={atol:g} + "
            f"rtol={rtol:g}*|ref|; max abs error {d.max_abs:.6g}, max rel error {d.max_rel:.6g}; worst element "
            f"{d.worst_index}: engine {d.worst_got:.6g}, reference {d.worst_want:.6g}"
        )
        if cosine is not None and d.cosine is not None:
            lines.append(f"    cosine similarity {d.cosine:.6f} (required >= {cosine:g})")
        lines.append(f"    would have passed with atol={d.atol_needed:.3g} (rtol={rtol:g}) "
                     f"or rtol={d.rtol_needed:.3g} (atol={atol:g})")
    lines.append("If the difference is expected (precision lowered on purpose), widen the tolerance for this output; "
                 "otherwise the engine miscomputes these inputs: report it with the input above.")
    return "\n".join(lines)
