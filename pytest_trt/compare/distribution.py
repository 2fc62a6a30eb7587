"""Classifier output distribution statistics and their drift in standard deviations.

The seed incident changed INT8 calibration: scores shifted everywhere, yet
most argmaxes held for a while.  Mean max-softmax confidence, mean entropy and
mean top-2 margin move before accuracy does.  A drift is measured in units of
the statistic's own sampling noise, estimated by bootstrap over the golden set
(fixed seed, so a golden always yields the same baseline).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

STATS = ("max_confidence", "entropy", "top2_margin")
RESAMPLES = 200
SEED = 0
#: Drift is judged against ``max(bootstrap SD, SD_FLOOR * max(1, |golden mean|))``.
#: A near-constant output (a near-uniform classifier: entropy 6.91 +- 1.6e-12 over
#: the golden set) has a bootstrap SD at rounding level, so a change in the 7th
#: digit read as 68,105 SD.  The floor puts the smallest SD that counts at 0.1 % of
#: the statistic's scale: 0.001 for confidence and margin (probabilities, scale
#: 1), 0.0069 for the entropy of 1000 classes (scale ln 1000); 3 SD then still
#: catches a 0.3-point shift of mean confidence, the size calibration changes make.
SD_FLOOR = 1e-3


def looks_like_probabilities(scores: np.ndarray) -> bool:
    """Rows already in [0, 1] summing to 1 (a Softmax output) are taken as they are."""
    x = np.asarray(scores, dtype=np.float64)
    if x.size == 0 or x.min() < 0 or x.max() > 1:
        return False
    return bool(np.allclose(x.sum(axis=-1), 1.0, atol=1e-3))


def probabilities(scores: np.ndarray, *, logits: bool) -> np.ndarray:
    """Per-sample class probabilities (stable softmax of logits), float64."""
    x = np.asarray(scores, dtype=np.float64)
    if not logits:
        return x
    x = x - x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return np.asarray(x, dtype=np.float64)


def per_sample(scores: np.ndarray, *, logits: bool) -> dict[str, np.ndarray]:
    """Each statistic of :data:`STATS` per sample, float64."""
    p = probabilities(scores, logits=logits)
    top2 = -np.partition(-p, 1, axis=-1)[:, :2]
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return {
        "max_confidence": top2[:, 0],
        "entropy": -plogp.sum(axis=-1),
        "top2_margin": top2[:, 0] - top2[:, 1],
    }


def bootstrap_sd(values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Standard deviation of the mean of ``values`` over ``resamples`` bootstrap draws."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return 0.0
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for i in range(resamples):
        means[i] = v[rng.integers(0, v.size, v.size)].mean()
    return float(means.std(ddof=1))


@dataclass(frozen=True)
class StatBaseline:
    """The golden's mean of one statistic and that mean's bootstrap SD."""

    stat: str
    mean: float
    sd: float


@dataclass(frozen=True)
class DistributionBaseline:
    """Baseline of a classifier output: whether scores are logits, and per statistic."""

    logits: bool
    stats: tuple[StatBaseline, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"logits": self.logits, "stats": {s.stat: {"mean": s.mean, "sd": s.sd} for s in self.stats}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DistributionBaseline:
        stats = tuple(StatBaseline(k, float(v["mean"]), float(v["sd"])) for k, v in sorted(d["stats"].items()))
        return cls(bool(d["logits"]), stats)


def baseline(golden_scores: np.ndarray) -> DistributionBaseline:
    """Compute the baseline of a golden classifier output ``(N, C)``."""
    logits = not looks_like_probabilities(golden_scores)
    values = per_sample(golden_scores, logits=logits)
    return DistributionBaseline(
        logits, tuple(StatBaseline(k, float(values[k].mean()), bootstrap_sd(values[k])) for k in STATS)
    )


@dataclass(frozen=True)
class Drift:
    """How far the obtained mean of a statistic moved, in golden bootstrap SDs."""

    stat: str
    golden_mean: float
    obtained_mean: float
    sd: float  # the golden's bootstrap SD
    drift_sd: float  # |obtained - golden| / max(sd, floor)
    floor: float = 0.0

    def sd_text(self) -> str:
        if self.floor > self.sd:
            return f"SD floor {self.floor:.3g} (bootstrap SD {self.sd:.3g})"
        return f"bootstrap SD {self.sd:.3g}"


def sd_floor(golden_mean: float) -> float:
    """The smallest SD a drift is measured in: :data:`SD_FLOOR` of the statistic's scale."""
    return SD_FLOOR * max(1.0, abs(golden_mean))


def drift(base: DistributionBaseline, obtained: Mapping[str, np.ndarray]) -> tuple[Drift, ...]:
    """Drifts of the obtained per-sample statistics (from :func:`per_sample`)."""
    out = []
    for s in base.stats:
        mean = float(np.mean(obtained[s.stat])) if obtained[s.stat].size else s.mean
        delta = abs(mean - s.mean)
        floor = sd_floor(s.mean)
        out.append(Drift(s.stat, s.mean, mean, s.sd, 0.0 if delta == 0 else delta / max(s.sd, floor), floor))
    return tuple(out)
