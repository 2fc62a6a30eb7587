"""Metrics of one output against its thresholds: :class:`OutputMetrics` -> :class:`Breach` list."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pytest_trt.compare.distribution import Drift
from pytest_trt.compare.metrics import ElementStats, TagMetrics
from pytest_trt.compare.thresholds import Thresholds

STAT_LABELS = {
    "max_confidence": "Mean max softmax confidence",
    "entropy": "Mean entropy",
    "top2_margin": "Mean top-2 margin",
}


@dataclass(frozen=True)
class OutputMetrics:
    """Every figure of one output: elementwise, classifier, per tag, distribution."""

    name: str
    samples: int
    elements: ElementStats
    top1_agreement: float | None = None
    accuracy: float | None = None
    golden_accuracy: float | None = None
    tags: tuple[TagMetrics, ...] = ()
    drift: tuple[Drift, ...] = ()

    @property
    def accuracy_drop(self) -> float | None:
        """obtained minus golden accuracy (negative: worse), as a fraction."""
        if self.accuracy is None or self.golden_accuracy is None:
            return None
        return self.accuracy - self.golden_accuracy

    def to_dict(self) -> dict[str, Any]:
        """JSON-able figures (for approvals, report attributes and ``--json``)."""
        return {
            "samples": self.samples,
            **self.elements.to_dict(),
            "top1_agreement": self.top1_agreement,
            "accuracy": self.accuracy,
            "golden_accuracy": self.golden_accuracy,
            "accuracy_drop": self.accuracy_drop,
            "tags": {
                t.tag: {"count": t.count, "agreement": t.agreement, "accuracy": t.accuracy,
                        "golden_accuracy": t.golden_accuracy}
                for t in self.tags
            },
            "drift": {d.stat: {"golden": d.golden_mean, "obtained": d.obtained_mean, "sd": d.sd, "drift_sd": d.drift_sd}
                      for d in self.drift},
        }


@dataclass(frozen=True)
class Breach:
    """One breached threshold: ``[REGRESSION] <where>: <text>``."""

    output: str
    text: str
    tag: str | None = None

    @property
    def where(self) -> str:
        return self.output if self.tag is None else f"{self.output}[tag={self.tag}]"

    def line(self) -> str:
        return f"[REGRESSION] {self.where}: {self.text}"


def num(x: float) -> str:
    """Three significant digits, the seed's style (0.18, 0.05, 3.1e-05)."""
    if math.isinf(x) or math.isnan(x):
        return str(x)
    return f"{x:.3g}"


def pct(x: float, *, signed: bool = False) -> str:
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _accuracy_breach(output: str, drop: float | None, acc: float | None, gacc: float | None, limit: float | None,
                     count: int, tag: str | None) -> list[Breach]:
    if limit is None or drop is None or acc is None or gacc is None or -drop <= limit:
        return []
    text = (f"Top-1 Acc drop: {pct(drop, signed=True)} < threshold({pct(-limit, signed=True)}) "
            f"(accuracy {pct(gacc)} -> {pct(acc)}, {count} labelled samples)")
    return [Breach(output, text, tag)]


def evaluate(m: OutputMetrics, t: Thresholds) -> tuple[Breach, ...]:
    """Every threshold ``m`` breaches, in a fixed order."""
    e, out, name = m.elements, [], m.name
    if e.nonfinite_obtained and not t.allow_nonfinite:
        out.append(Breach(name, f"Non-finite values: {e.nonfinite_obtained} NaN/Inf in the obtained output "
                                "(pass allow_nonfinite=True if they are expected)"))
    if e.nonfinite_golden and not t.allow_nonfinite:
        out.append(Breach(name, f"Non-finite values: {e.nonfinite_golden} NaN/Inf in the golden output"))
    if t.l2_delta is not None and not e.l2_delta <= t.l2_delta:
        out.append(Breach(name, f"Output L2 norm delta: {num(e.l2_delta)} > threshold({num(t.l2_delta)})"))
    if t.max_abs is not None and not e.max_abs <= t.max_abs:
        out.append(Breach(name, f"Max abs error: {num(e.max_abs)} > threshold({num(t.max_abs)})"))
    if t.max_rel is not None and not e.max_rel <= t.max_rel:
        out.append(Breach(name, f"Max rel error: {num(e.max_rel)} > threshold({num(t.max_rel)})"))
    if t.cosine is not None and not e.cosine >= t.cosine:
        out.append(Breach(name, f"Cosine similarity: {e.cosine:.6f} < threshold({t.cosine:.6f})"))
    if t.top1_agreement is not None and m.top1_agreement is not None and m.top1_agreement < t.top1_agreement:
        out.append(Breach(name, f"Top-1 agreement with golden: {pct(m.top1_agreement)} "
                                f"< threshold({pct(t.top1_agreement)}) over {m.samples} samples"))
    out += _accuracy_breach(name, m.accuracy_drop, m.accuracy, m.golden_accuracy, t.top1_drop, m.samples, None)
    for tag in m.tags:
        out += _accuracy_breach(name, tag.accuracy_drop, tag.accuracy, tag.golden_accuracy, t.top1_drop,
                                tag.count, tag.tag)
    if t.drift_sd is not None:
        for d in m.drift:
            if d.drift_sd > t.drift_sd:
                out.append(Breach(name, f"{STAT_LABELS.get(d.stat, d.stat)} drift: {d.drift_sd:.1f} SD > "
                                        f"threshold({num(t.drift_sd)} SD) ({num(d.golden_mean)} -> "
                                        f"{num(d.obtained_mean)}, bootstrap SD {num(d.sd)})"))
    return tuple(out)
