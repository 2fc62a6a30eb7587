"""Regression thresholds: one :class:`Thresholds` per output, with a default.

Numpy-free on purpose: the pytest hook module reads ini defaults through this
module while the plugin loads, and loading must stay cheap.

Layering, lowest first: built-in defaults (the seed incident's figures:
``l2_delta=0.05``, ``top1_drop=0.005``), ini keys ``trt_golden_<field>``,
keyword arguments of ``check()``, then ``per_output={"name": {...}}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pytest_trt.errors import GoldenError

#: the one threshold that is a switch, not a number; each other field bounds the metric of the same name,
#: judged as its row of :data:`pytest_trt.compare.rules.RULES` says (upper or lower bound)
SWITCHES = ("allow_nonfinite",)


@dataclass(frozen=True)
class Thresholds:
    """What an output may change relative to its golden; ``None`` switches a check off.

    ``l2_delta``: max relative L2 norm delta ``||obtained - golden|| / ||golden||``.
    ``max_abs`` / ``max_rel``: max elementwise absolute / relative error.
    ``cosine``: min cosine similarity of the flattened outputs.
    ``top1_agreement``: min fraction of samples whose argmax equals the golden's;
    when unset and the golden dataset has no labels, ``1 - top1_drop`` (the
    golden's own predictions stand in for labels: 99.5 % by default).
    ``top1_drop``: max accuracy drop vs the golden's accuracy, as a fraction
    (0.005 = half a percentage point), overall and per tag; needs labels.
    ``drift_sd``: max drift of a classifier distribution statistic (mean max
    softmax confidence, mean entropy, mean top-2 margin), in standard
    deviations: ``max(bootstrap SD over the golden set, 0.001 * max(1, |golden mean|))``.

    Classifier figures apply to outputs declared with ``check(classifier=...)``
    or detected as class scores.  A threshold the user sets that no output
    can evaluate fails the check with the reason; a built-in default that
    cannot apply is reported as not evaluated.
    ``allow_nonfinite``: NaN or Inf in the obtained outputs fails unless True.
    """

    l2_delta: float | None = 0.05
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None
    top1_agreement: float | None = None
    top1_drop: float | None = 0.005
    drift_sd: float | None = 3.0
    allow_nonfinite: bool = False

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self) if f.name not in SWITCHES):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise GoldenError(f"threshold {name}={value!r} must be a non-negative number or None", field=name)
            object.__setattr__(self, name, float(value))
        if not isinstance(self.allow_nonfinite, bool):
            raise GoldenError(f"threshold allow_nonfinite={self.allow_nonfinite!r} must be True or False")

    def updated(self, changes: Mapping[str, Any]) -> Thresholds:
        """A copy with ``changes`` applied; unknown names raise with the valid ones."""
        unknown = sorted(set(changes) - set(threshold_names()))
        if unknown:
            raise GoldenError(
                f"unknown threshold {unknown[0]!r}; valid thresholds: {', '.join(threshold_names())}",
                field=unknown[0],
            )
        return replace(self, **dict(changes))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def threshold_names() -> tuple[str, ...]:
    """The keyword names ``check()`` accepts as thresholds."""
    return tuple(f.name for f in fields(Thresholds))


@dataclass(frozen=True)
class ThresholdSet:
    """A default :class:`Thresholds` plus overrides per output name."""

    default: Thresholds = field(default_factory=Thresholds)
    per_output: Mapping[str, Thresholds] = field(default_factory=dict)
    #: names the user set for every output (ini, check() keywords): each must be evaluated
    given: frozenset[str] = frozenset()
    #: names the user set for one output (``per_output``)
    given_per_output: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: names ``check()`` keywords set, ``None`` (switched off) included: a measured tolerance leaves them alone
    explicit: frozenset[str] = frozenset()

    def for_output(self, name: str) -> Thresholds:
        return self.per_output.get(name, self.default)

    def with_overrides(
        self, changes: Mapping[str, Any], per_output: Mapping[str, Mapping[str, Any]] | None = None
    ) -> ThresholdSet:
        """Apply ``check()`` keywords to the default and ``per_output`` dicts on top of it."""
        default = self.default.updated(changes)
        outputs = {name: t.updated(changes) for name, t in self.per_output.items()}
        given_per = dict(self.given_per_output)
        for name, overrides in (per_output or {}).items():
            outputs[name] = outputs.get(name, default).updated(overrides)
            given_per[name] = given_per.get(name, frozenset()) | _set(overrides)
        return ThresholdSet(default, outputs, self.given | _set(changes), given_per, self.explicit | frozenset(changes))

    def with_measured(self, suggested: Mapping[str, Mapping[str, float]]) -> ThresholdSet:
        """Per output, the thresholds a noise measurement suggests (``check(tolerance="measured")``) in place of
        the defaults and ini values; a threshold the user gave (``check()`` keyword, ``per_output``) still wins."""
        outputs = dict(self.per_output)
        for name, values in suggested.items():
            kept = self.given | self.explicit | self.given_per_output.get(name, frozenset())
            outputs[name] = self.for_output(name).updated({k: v for k, v in values.items() if k not in kept})
        return replace(self, per_output=outputs)


def _set(changes: Mapping[str, Any]) -> frozenset[str]:
    """Names set to a value (``None`` switches a threshold off: nothing to evaluate)."""
    return frozenset(k for k, v in changes.items() if v is not None and k != "allow_nonfinite")


def parse_ini_value(name: str, raw: str) -> float | bool | None:
    """Parse an ini value for threshold ``name``: a number, ``none``/``off``, or a bool."""
    text = raw.strip().lower()
    if name == "allow_nonfinite":
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise GoldenError(f"ini trt_golden_{name}: expected true or false, got {raw!r}", field=name)
    if text in ("", "none", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise GoldenError(f"ini trt_golden_{name}: expected a number or 'none', got {raw!r}", field=name) from None
