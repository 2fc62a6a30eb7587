"""Metrics of one output against its thresholds: every metric checked, passed, failed or not evaluated.

Equality passes: a metric exactly at its threshold is within it (``<=`` for
upper bounds, ``>=`` for lower bounds).  A threshold the user set that no
output can evaluate is *refused* by :func:`refusals`: it never passes quietly.
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_trt.compare.thresholds import Thresholds
from pytest_trt.compare.verdict import (
    FAIL,
    INFO,
    NO_LABELS,
    NOT_EVALUATED,
    PASS,
    STAT_LABELS,
    Breach,
    MetricCheck,
    OutputMetrics,
    num,
    pct,
)


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
