"""The golden verdict as a table: one :class:`Rule` per threshold of :class:`~pytest_trt.compare.thresholds.Thresholds`.

A row says how its figure is read from an output's :class:`~pytest_trt.compare.verdict.OutputMetrics`
(``value``), how it is judged against the threshold of the same name (``upper``: ``value <= threshold``,
else ``value >= threshold``; equality passes; ``judge`` for the rows that need more than one bound),
and how it is rendered (``label`` and ``show`` in the failure line, ``column``/``cell`` in the per-output
table, ``delta`` in the summary of an approved refresh, ``report`` in the upgrade review's metric rows).
:mod:`pytest_trt.compare.assess` and :mod:`pytest_trt.compare.render` only walk this table.

Adding a golden metric: compute it (a field of :class:`~pytest_trt.compare.metrics.ElementStats` and its
accumulation, or of ``OutputMetrics``), add its threshold field to ``Thresholds``, and add one row here.
The check keyword, the ini key ``trt_golden_<name>``, the failure line, the table column, the verdict
JSON and the upgrade review follow from the row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_trt.compare.verdict import FAIL, INFO, NO_LABELS, NOT_EVALUATED, PASS, MetricCheck, OutputMetrics, num, pct

if TYPE_CHECKING:
    from pytest_trt.compare.thresholds import Thresholds

#: reason a classifier threshold is not evaluated on an output that is not class scores
NOT_CLASS_SCORES = "output {output!r} is not declared or detected as class scores (declare it with classifier=[...])"
STAT_LABELS = {
    "max_confidence": "Mean max softmax confidence",
    "entropy": "Mean entropy",
    "top2_margin": "Mean top-2 margin",
}


def _cosine(x: float) -> str:
    return f"{x:.6f}"


Judge = Callable[["Rule", OutputMetrics, "Thresholds"], list[MetricCheck]]


def bounded(rule: Rule, m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    """The default judgement: the row's value against its threshold (nothing when either is unset)."""
    limit, value = getattr(t, rule.name), rule.value(m)
    if limit is None or value is None:
        return []
    return [rule.measure(m.name, value, limit)]


@dataclass(frozen=True)
class Rule:
    """One metric and its threshold: how the figure is computed, judged and rendered."""

    name: str  # the threshold's name: check() keyword, Thresholds field, MetricCheck.metric
    label: str  # the failure line's name of the figure
    value: Callable[[OutputMetrics], float | None]  # the figure of one output (None: not computed for it)
    upper: bool = True  # the threshold is an upper bound (value <= threshold) or a lower one (value >= threshold)
    show: Callable[[float], str] = num  # a value or threshold in the failure line
    column: str | None = None  # its column in the per-output table
    cell: Callable[[OutputMetrics], str] | None = None  # that column's text (default: ``show(value)`` or "-")
    delta: Callable[[OutputMetrics], str | None] | None = None  # its part of an approved refresh's summary line
    classifier: bool = False  # only class-score outputs have it
    report: bool = False  # a metric row of the upgrade review (key of OutputMetrics.to_dict(), bound max/min)
    judge: Judge = bounded

    def measure(self, output: str, value: float, limit: float, *, tag: str | None = None,
                extra: str = "", ok: bool | None = None) -> MetricCheck:
        """``value`` against ``limit``; equality passes (``ok``: decided by the caller, in sample counts)."""
        if ok is None:
            ok = value <= limit if self.upper else value >= limit
        op = ("<=" if ok else ">") if self.upper else (">=" if ok else "<")
        text = f"{self.label}: {self.show(value)} {op} threshold({self.show(limit)}){extra}"
        return MetricCheck(output, self.name, PASS if ok else FAIL, text, value, limit, tag)

    def text(self, m: OutputMetrics) -> str:
        """The table cell of output ``m``."""
        if self.cell is not None:
            return self.cell(m)
        value = self.value(m)
        return "-" if value is None else self.show(value)


def not_evaluated(output: str, name: str, limit: float, reason: str, tag: str | None = None) -> MetricCheck:
    return MetricCheck(output, name, NOT_EVALUATED, f"{name}={num(limit)}: not evaluated: {reason}", None, limit, tag,
                       reason=reason)


def _nonfinite(rule: Rule, m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    e, out = m.elements, list[MetricCheck]()
    if t.allow_nonfinite:
        return out
    if e.nonfinite_obtained:
        out.append(MetricCheck(m.name, rule.name, FAIL,
                               f"Non-finite values: {e.nonfinite_obtained} NaN/Inf in the obtained output "
                               "(pass allow_nonfinite=True if they are expected)", e.nonfinite_obtained, 0))
    if e.nonfinite_golden:
        out.append(MetricCheck(m.name, rule.name, FAIL,
                               f"Non-finite values: {e.nonfinite_golden} NaN/Inf in the golden output",
                               e.nonfinite_golden, 0))
    return out


def within(fraction: float, limit: float | None, samples: int) -> bool:
    """Whether ``fraction`` of ``samples`` (computed in floats: 0.92 - 0.915 = 0.0050000000000000044) is at most
    ``limit``, compared as whole samples: 5 of 1000 is within 0.005, exactly at the threshold."""
    assert limit is not None
    return round(fraction * samples) <= limit * samples


def agreement_threshold(m: OutputMetrics, t: Thresholds) -> float | None:
    """``top1_agreement``, or, without labels, ``1 - top1_drop`` (the golden's own predictions as the reference)."""
    if t.top1_agreement is not None:
        return t.top1_agreement
    if m.accuracy is None and t.top1_drop is not None:
        return 1.0 - t.top1_drop
    return None


def _agreement(rule: Rule, m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    value = rule.value(m)
    assert value is not None
    limit = agreement_threshold(m, t)
    over = f" over {m.samples} samples"
    if limit is None:  # always shown: the one classifier figure that needs no labels
        return [MetricCheck(m.name, rule.name, INFO, f"{rule.label}: {pct(value)}{over}", value)]
    if t.top1_agreement is None:  # 1 - top1_drop: at most that fraction of the samples may change their top-1
        return [rule.measure(m.name, value, limit, extra=over, ok=within(1.0 - value, t.top1_drop, m.samples))]
    return [rule.measure(m.name, value, limit, extra=over)]


def _accuracy_check(rule: Rule, output: str, drop: float | None, acc: float | None, gacc: float | None,
                    limit: float, count: int, tag: str | None) -> MetricCheck:
    assert drop is not None and acc is not None and gacc is not None
    ok = within(-drop, limit, count)
    op = ">=" if ok else "<"
    text = (f"{rule.label}: {pct(drop, signed=True)} {op} threshold({pct(-limit, signed=True)}) "
            f"(accuracy {pct(gacc)} -> {pct(acc)}, {count} labelled samples)")
    return MetricCheck(output, rule.name, PASS if ok else FAIL, text, -drop, limit, tag)


def _accuracy(rule: Rule, m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    """Overall, then per tag: the accuracy may drop by at most the threshold (a fraction)."""
    limit = t.top1_drop
    if limit is None:
        return []
    if m.accuracy is None:
        return [not_evaluated(m.name, rule.name, limit, NO_LABELS)]
    out = [_accuracy_check(rule, m.name, m.accuracy_drop, m.accuracy, m.golden_accuracy, limit, m.samples, None)]
    out += [_accuracy_check(rule, m.name, g.accuracy_drop, g.accuracy, g.golden_accuracy, limit, g.count, g.tag)
            for g in m.tags if g.accuracy_drop is not None]
    return out


def _drift(rule: Rule, m: OutputMetrics, t: Thresholds) -> list[MetricCheck]:
    """Each distribution statistic's drift, in SDs of the golden's mean."""
    limit = t.drift_sd
    if limit is None:
        return []
    if not m.drift:
        return [not_evaluated(m.name, rule.name, limit, f"output {m.name!r} has no distribution baseline "
                                                        "(integer class indices, or a golden made without one)")]
    out = []
    for d in m.drift:
        ok = d.drift_sd <= limit
        text = (f"{STAT_LABELS.get(d.stat, d.stat)} drift: {d.drift_sd:.1f} SD {'<=' if ok else '>'} "
                f"threshold({num(limit)} SD) ({num(d.golden_mean)} -> {num(d.obtained_mean)}, {d.sd_text()})")
        out.append(MetricCheck(m.name, rule.name, PASS if ok else FAIL, text, d.drift_sd, limit, stat=d.stat))
    return out


def _accuracy_cell(m: OutputMetrics) -> str:
    if m.accuracy is None:
        return "-"
    return f"{'-' if m.golden_accuracy is None else pct(m.golden_accuracy)} -> {pct(m.accuracy)}"


def _accuracy_delta(m: OutputMetrics) -> str | None:
    if m.accuracy is None or m.golden_accuracy is None:
        return None
    return f"accuracy {pct(m.golden_accuracy)} -> {pct(m.accuracy)} ({pct(m.accuracy_drop or 0.0, signed=True)})"


def _agreement_delta(m: OutputMetrics) -> str | None:
    return None if m.top1_agreement is None else f"top-1 agreement {pct(m.top1_agreement)}"


def _agreement_cell(m: OutputMetrics) -> str:
    return "-" if m.top1_agreement is None else pct(m.top1_agreement)


#: every threshold, in the order checks are listed and columns drawn
RULES: tuple[Rule, ...] = (
    Rule("allow_nonfinite", "Non-finite values", lambda m: float(m.elements.nonfinite_obtained), judge=_nonfinite),
    Rule("l2_delta", "Output L2 norm delta", lambda m: m.elements.l2_delta, column="l2_delta", report=True,
         delta=lambda m: f"L2 delta {num(m.elements.l2_delta)}"),
    Rule("max_abs", "Max abs error", lambda m: m.elements.max_abs, column="max_abs", report=True,
         delta=lambda m: f"max abs {num(m.elements.max_abs)}"),
    Rule("max_rel", "Max rel error", lambda m: m.elements.max_rel, column="max_rel", report=True),
    Rule("cosine", "Cosine similarity", lambda m: m.elements.cosine, upper=False, show=_cosine, column="cosine",
         report=True, delta=lambda m: f"cosine {m.elements.cosine:.6f}"),
    Rule("top1_agreement", "Top-1 agreement", lambda m: m.top1_agreement, upper=False, show=pct,
         column="top1_agree", cell=_agreement_cell, delta=_agreement_delta, classifier=True, report=True,
         judge=_agreement),
    Rule("top1_drop", "Top-1 Acc drop", lambda m: None if m.accuracy_drop is None else -m.accuracy_drop,
         show=pct, column="accuracy", cell=_accuracy_cell, delta=_accuracy_delta, classifier=True, judge=_accuracy),
    Rule("drift_sd", "Distribution drift", lambda m: max((d.drift_sd for d in m.drift), default=None),
         classifier=True, judge=_drift),
)

#: why a threshold the user set could not be evaluated by any output, and what to use instead
REFUSALS = {
    "top1_drop": "top1_drop needs labels in the golden dataset (GoldenDataset.from_arrays(..., labels=...)); "
                 "or use top1_agreement",
    "top1_agreement": "top1_agreement needs an output of class scores: declare it with classifier=[\"<output>\"]",
    "drift_sd": "drift_sd needs an output of float class scores: declare it with classifier=[\"<output>\"]",
}


def rule(name: str) -> Rule:
    """The row of threshold ``name``."""
    for r in RULES:
        if r.name == name:
            return r
    raise KeyError(name)


def report_bounds() -> dict[str, tuple[str, str]]:
    """``{figure: (threshold, "max" or "min")}`` of the rows the upgrade review lists per output."""
    return {r.name: (r.name, "max" if r.upper else "min") for r in RULES if r.report}
