"""Metrics of one output against its thresholds: every row of :data:`~pytest_trt.compare.rules.RULES` judged.

Equality passes: a metric exactly at its threshold is within it (``<=`` for
upper bounds, ``>=`` for lower bounds).  A threshold the user set that no
output can evaluate is *refused* by :func:`refusals`: it never passes quietly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from pytest_trt.compare.rules import NOT_CLASS_SCORES, REFUSALS, RULES, not_evaluated, rule
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet
from pytest_trt.compare.verdict import FAIL, NO_LABELS, NOT_EVALUATED, Breach, MetricCheck, OutputMetrics, Verdict


def assess(m: OutputMetrics, t: Thresholds) -> tuple[MetricCheck, ...]:
    """Every metric of ``m`` against ``t``, in the table's order: passed, failed, informational, not evaluated."""
    out: list[MetricCheck] = []
    classes = m.top1_agreement is not None  # class-score outputs are the ones with a top-1 figure
    for r in RULES:
        if r.classifier and not classes:
            limit = getattr(t, r.name)
            if limit is not None:
                out.append(not_evaluated(m.name, r.name, limit, NOT_CLASS_SCORES.format(output=m.name)))
            continue
        out += r.judge(r, m, t)
    return tuple(out)


def evaluate(m: OutputMetrics, t: Thresholds) -> tuple[Breach, ...]:
    """Every threshold ``m`` breaches, in a fixed order."""
    return tuple(c.breach() for c in assess(m, t) if c.status == FAIL)


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


def unevaluable(limits: ThresholdSet, facts: Mapping[str, OutputMetrics]) -> tuple[str, ...]:
    """The refusals a check would give with ``limits`` on outputs whose figures are ``facts`` (an update's own
    outputs, :meth:`~pytest_trt.compare.accumulate.OutputAccumulator.as_golden`): the same texts as :func:`judge`."""
    return judge(facts, limits).refused


def judge(
    metrics: Mapping[str, OutputMetrics],
    limits: ThresholdSet,
    *,
    problems: Iterable[str] = (),
    provenance: Iterable[Any] = (),
    structure_text: str | None = None,
) -> Verdict:
    """Every metric against its thresholds, plus refusals of thresholds nothing could evaluate."""
    checks: tuple[MetricCheck, ...] = tuple(c for name, m in metrics.items()
                                            for c in assess(m, limits.for_output(name)))
    refused = refusals(checks, limits.given, limits.given_per_output)

    def shown(c: MetricCheck) -> bool:
        # a built-in default that does not apply to an output (drift of class indices, top-1 of
        # an embedding) is noise; one the user set, or an accuracy check lacking labels, is news
        return (c.status != NOT_EVALUATED or c.metric in limits.given
                or c.metric in limits.given_per_output.get(c.output, ()) or c.reason == NO_LABELS)

    return Verdict(tuple(c for c in checks if shown(c)), refused, tuple(problems), tuple(provenance), structure_text)


def with_noise(verdict: Verdict, figures: Mapping[str, Mapping[str, float]]) -> Verdict:
    """``verdict`` with the noise measured at approval beside each threshold it bounds:
    ``threshold(0.05), measured noise 0.0012`` (``figures``: :meth:`pytest_trt.golden.noise.Noise.figures`)."""
    def add(c: MetricCheck) -> MetricCheck:
        value = figures.get(c.output, {}).get(c.metric)
        if value is None or c.threshold is None or c.tag is not None or c.stat is not None:
            return c
        show = rule(c.metric).show
        bare = f"threshold({show(c.threshold)})"
        if bare not in c.text:
            return c
        text = c.text.replace(bare, f"{bare}, measured noise {show(value)}", 1)
        return replace(c, text=text, noise=value)

    return replace(verdict, checks=tuple(add(c) for c in verdict.checks))
