"""Metrics of one output against its thresholds: :class:`OutputMetrics` -> :class:`Breach` list."""

from __future__ import annotations

import math
from collections.abc import Mapping
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
            "drift": {d.stat: {"golden": d.golden_mean, "obtained": d.obtained_mean, "sd": d.sd, "sd_floor": d.floor,
                              "drift_sd": d.drift_sd}
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


#: :attr:`MetricCheck.status` values
PASS, FAIL, INFO, NOT_EVALUATED = "pass", "fail", "info", "not evaluated"
NO_LABELS = "the golden dataset has no labels"
_MARK = {PASS: "[ok]", FAIL: "[REGRESSION]", INFO: "[info]", NOT_EVALUATED: "[not evaluated]"}


@dataclass(frozen=True)
class MetricCheck:
    """One metric of one output (or tag) against its threshold.

    ``metric`` is the threshold's name (``l2_delta``, ``top1_drop``, ...;
    ``drift_sd`` checks carry ``stat``).  ``status``: ``pass``/``fail``;
    ``info`` for a figure computed without a threshold; ``not evaluated``
    when the threshold is set but the data cannot evaluate it (``reason``).
    ``value`` and ``threshold`` are in the metric's own unit (fractions for
    accuracy and agreement, SDs for drift).
    """

    output: str
    metric: str
    status: str
    text: str
    value: float | None = None
    threshold: float | None = None
    tag: str | None = None
    stat: str | None = None
    reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.status != FAIL

    @property
    def evaluated(self) -> bool:
        return self.status in (PASS, FAIL)

    @property
    def where(self) -> str:
        return self.output if self.tag is None else f"{self.output}[tag={self.tag}]"

    def line(self) -> str:
        return f"{_MARK[self.status]} {self.where}: {self.text}"

    def breach(self) -> Breach:
        return Breach(self.output, self.text, self.tag)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class ProvenanceChange:
    """One provenance field whose golden value differs from the engine's."""

    field: str
    golden: str
    engine: str
    fatal: bool = False  # the provenance policy fails the check on it

    def to_dict(self) -> dict[str, Any]:
        return {"field": self.field, "golden": self.golden, "engine": self.engine, "fatal": self.fatal}


@dataclass(frozen=True)
class Verdict:
    """Everything a golden check decided: every metric checked, refusals, provenance, structure.

    ``checks`` lists every metric computed, passed ones too; ``refused``
    names thresholds the user set that nothing could evaluate (each fails
    the check); ``problems`` are other reasons to fail (dataset mismatch,
    provenance the policy makes fatal).
    """

    checks: tuple[MetricCheck, ...] = ()
    refused: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    provenance: tuple[ProvenanceChange, ...] = ()
    structure: str | None = None  # rendered structure diff that fails the check

    @property
    def breaches(self) -> tuple[Breach, ...]:
        return tuple(c.breach() for c in self.checks if c.status == FAIL)

    @property
    def passed(self) -> bool:
        return not (self.breaches or self.refused or self.problems or self.structure)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checks": [c.to_dict() for c in self.checks],
            "refused": list(self.refused),
            "problems": list(self.problems),
            "provenance": [p.to_dict() for p in self.provenance],
            "structure": self.structure,
        }


def num(x: float) -> str:
    """Three significant digits, the seed's style (0.18, 0.05, 3.1e-05)."""
    if math.isinf(x) or math.isnan(x):
        return str(x)
    return f"{x:.3g}"


def pct(x: float, *, signed: bool = False) -> str:
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _bound(name: str, label: str, value: float, limit: float | None, *, upper: bool, fmt: str = "num",
           tag: str | None = None, output: str = "", extra: str = "") -> MetricCheck | None:
    """``value`` against an upper (``<=``) or lower (``>=``) bound; equality passes."""
    if limit is None:
        return None
    ok = value <= limit if upper else value >= limit
    show = pct if fmt == "pct" else (lambda x: f"{x:.6f}") if fmt == "cos" else num
    op = ("<=" if ok else ">") if upper else (">=" if ok else "<")
    text = f"{label}: {show(value)} {op} threshold({show(limit)}){extra}"
    return MetricCheck(output, name, PASS if ok else FAIL, text, value, limit, tag)


def _skip(output: str, name: str, limit: float, reason: str, tag: str | None = None) -> MetricCheck:
    return MetricCheck(output, name, NOT_EVALUATED, f"{name}={num(limit)}: not evaluated: {reason}", None, limit, tag,
                       reason=reason)


def agreement_threshold(m: OutputMetrics, t: Thresholds) -> float | None:
    """``top1_agreement``, or, without labels, ``1 - top1_drop`` (the golden's own predictions as the reference)."""
    if t.top1_agreement is not None:
        return t.top1_agreement
    if m.accuracy is None and t.top1_drop is not None:
        return 1.0 - t.top1_drop
    return None


def _elementwise(m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    e, name, out = m.elements, m.name, []
    if e.nonfinite_obtained or e.nonfinite_golden:
        if not t.allow_nonfinite:
            if e.nonfinite_obtained:
                out.append(MetricCheck(name, "allow_nonfinite", FAIL,
                                       f"Non-finite values: {e.nonfinite_obtained} NaN/Inf in the obtained output "
                                       "(pass allow_nonfinite=True if they are expected)", e.nonfinite_obtained, 0))
            if e.nonfinite_golden:
                out.append(MetricCheck(name, "allow_nonfinite", FAIL,
                                       f"Non-finite values: {e.nonfinite_golden} NaN/Inf in the golden output",
                                       e.nonfinite_golden, 0))
    checks = (
        _bound("l2_delta", "Output L2 norm delta", e.l2_delta, t.l2_delta, upper=True, output=name),
        _bound("max_abs", "Max abs error", e.max_abs, t.max_abs, upper=True, output=name),
        _bound("max_rel", "Max rel error", e.max_rel, t.max_rel, upper=True, output=name),
        _bound("cosine", "Cosine similarity", e.cosine, t.cosine, upper=False, fmt="cos", output=name),
    )
    return out + [c for c in checks if c is not None]


def _accuracy(output: str, drop: float | None, acc: float | None, gacc: float | None, limit: float, count: int,
              tag: str | None) -> MetricCheck:
    assert drop is not None and acc is not None and gacc is not None
    ok = -drop <= limit
    op = ">=" if ok else "<"
    text = (f"Top-1 Acc drop: {pct(drop, signed=True)} {op} threshold({pct(-limit, signed=True)}) "
            f"(accuracy {pct(gacc)} -> {pct(acc)}, {count} labelled samples)")
    return MetricCheck(output, "top1_drop", PASS if ok else FAIL, text, -drop, limit, tag)


def _classifier(m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    name, out = m.name, []
    if m.top1_agreement is None:  # not a classifier output
        for fld in ("top1_agreement", "top1_drop", "drift_sd"):
            limit = getattr(t, fld)
            if limit is not None:
                out.append(_skip(name, fld, limit, f"output {name!r} is not declared or detected as class scores "
                                                   "(declare it with classifier=[...])"))
        return out
    limit = agreement_threshold(m, t)
    over = f" over {m.samples} samples"
    check = _bound("top1_agreement", "Top-1 agreement", m.top1_agreement, limit, upper=False, fmt="pct",
                   output=name, extra=over)
    out.append(check or MetricCheck(name, "top1_agreement", INFO,
                                    f"Top-1 agreement: {pct(m.top1_agreement)}{over}", m.top1_agreement))
    if t.top1_drop is not None:
        if m.accuracy is None:
            out.append(_skip(name, "top1_drop", t.top1_drop, NO_LABELS))
        else:
            out.append(_accuracy(name, m.accuracy_drop, m.accuracy, m.golden_accuracy, t.top1_drop, m.samples, None))
            for tag in m.tags:
                if tag.accuracy_drop is not None:
                    out.append(_accuracy(name, tag.accuracy_drop, tag.accuracy, tag.golden_accuracy, t.top1_drop,
                                         tag.count, tag.tag))
    if t.drift_sd is not None:
        if not m.drift:
            out.append(_skip(name, "drift_sd", t.drift_sd, f"output {name!r} has no distribution baseline "
                                                           "(integer class indices, or a golden made without one)"))
        for d in m.drift:
            ok = d.drift_sd <= t.drift_sd
            text = (f"{STAT_LABELS.get(d.stat, d.stat)} drift: {d.drift_sd:.1f} SD {'<=' if ok else '>'} "
                    f"threshold({num(t.drift_sd)} SD) ({num(d.golden_mean)} -> {num(d.obtained_mean)}, "
                    f"{d.sd_text()})")
            out.append(MetricCheck(name, "drift_sd", PASS if ok else FAIL, text, d.drift_sd, t.drift_sd, stat=d.stat))
    return out


def assess(m: OutputMetrics, t: Thresholds) -> tuple[MetricCheck, ...]:
    """Every metric of ``m`` against ``t``, in a fixed order: passed, failed, informational, not evaluated."""
    return tuple(_elementwise(m, t) + _classifier(m, t))


def evaluate(m: OutputMetrics, t: Thresholds) -> tuple[Breach, ...]:
    """Every threshold ``m`` breaches, in a fixed order."""
    return tuple(c.breach() for c in assess(m, t) if c.status == FAIL)


#: why a threshold the user set could not be evaluated by any output, and what to use instead
REFUSALS = {
    "top1_drop": "top1_drop needs labels in the golden dataset (GoldenDataset.from_arrays(..., labels=...)); "
                 "or use top1_agreement",
    "top1_agreement": "top1_agreement needs an output of class scores: declare it with classifier=[\"<output>\"]",
    "drift_sd": "drift_sd needs an output of float class scores: declare it with classifier=[\"<output>\"]",
}


def refusals(checks: tuple[MetricCheck, ...], given: frozenset[str], per_output: Mapping[str, frozenset[str]]
             ) -> tuple[str, ...]:
    """Thresholds the user set (``given`` for every output, ``per_output``) that no check evaluated."""
    evaluated = {(c.output, c.metric) for c in checks if c.evaluated}
    out = []
    for name in sorted(given):
        if not any(metric == name for _, metric in evaluated) and any(c.metric == name for c in checks):
            out.append(_refusal(name, [c for c in checks if c.metric == name]))
    for output, names in sorted(per_output.items()):
        for name in sorted(names):
            if (output, name) not in evaluated and any(c.metric == name and c.output == output for c in checks):
                out.append(f"{output}: " + _refusal(name, [c for c in checks if c.metric == name and
                                                            c.output == output]))
    return tuple(out)


def _refusal(name: str, checks: list[MetricCheck]) -> str:
    reasons = {c.reason for c in checks if c.reason}
    if name == "top1_drop" and reasons == {NO_LABELS}:
        return REFUSALS["top1_drop"]
    return REFUSALS.get(name, f"{name} could not be evaluated") + (f" ({'; '.join(sorted(reasons))})" if reasons
                                                                   else "")
