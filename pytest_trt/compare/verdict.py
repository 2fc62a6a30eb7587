"""What a golden check decided, as data: :class:`OutputMetrics` in, :class:`MetricCheck` and :class:`Verdict` out.

The rules (how each metric is judged and rendered) are :mod:`pytest_trt.compare.rules`; the evaluation
(metrics against thresholds) is :mod:`pytest_trt.compare.assess`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pytest_trt.compare.distribution import Drift
from pytest_trt.compare.metrics import ElementStats, TagMetrics


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
    noise: float | None = None  # the noise measured at approval, in the metric's unit (shown beside the threshold)

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
