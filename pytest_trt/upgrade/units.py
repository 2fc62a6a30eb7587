"""One unit and one text per golden metric, the check's own: the terminal, HTML and JSON of the review agree.

The golden check renders its figures through :mod:`pytest_trt.compare.rules` (``show``/``pct``):
a top-1 drop of 0.0804 is ``-8.0%`` against a threshold of ``-2.0%`` (signed, as the check's
``Top-1 Acc drop: -8.0% < threshold(-2.0%)``), agreement and accuracy are percentages, drift is in
bootstrap standard deviations (``SD``), and the element metrics are plain numbers.  ``value`` is the
figure in that unit (what JSON carries), ``text`` the rendered string.
"""

from __future__ import annotations

from pytest_trt.compare.rules import rule
from pytest_trt.compare.verdict import num, pct

PERCENT = ("top1_drop", "top1_agreement", "accuracy", "agreement")


def unit(metric: str) -> str:
    if metric in PERCENT:
        return "%"
    if metric.startswith("drift_sd"):
        return "SD"
    return ""


def value(metric: str, raw: float | None) -> float | None:
    """The figure in its unit: a drop is negative, as the check shows it."""
    if raw is None:
        return None
    if metric == "top1_drop":
        return -raw * 100.0
    if metric in PERCENT:
        return raw * 100.0
    return raw


def text(metric: str, raw: float | None) -> str:
    """The figure as the check renders it."""
    if raw is None:
        return "-"
    if metric == "top1_drop":
        return pct(-raw, signed=True)
    if metric in PERCENT:
        return pct(raw)
    if metric.startswith("drift_sd"):
        return f"{num(raw)} SD"
    if metric.startswith("mean "):
        return f"{raw:.4g}"
    try:
        return rule(metric).show(raw)
    except KeyError:
        return num(raw)


def breach_op(metric: str, bound: str | None) -> str:
    """The comparison a breached row prints: a drop shown negative breaches below its (negative) threshold."""
    if metric == "top1_drop":
        return "<"
    return ">" if bound == "max" else "<"


def within_op(metric: str, bound: str | None) -> str:
    if metric == "top1_drop":
        return "&ge;"
    return "&le;" if bound == "max" else "&ge;"
