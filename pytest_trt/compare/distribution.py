"""Classifier output distribution statistics and their drift in standard deviations.

The seed incident changed INT8 calibration: scores shifted everywhere, yet
most argmaxes held for a while.  Mean max-softmax confidence, mean entropy and
mean top-2 margin move before accuracy does.  A drift is measured in units of
the statistic's own sampling noise, estimated by bootstrap over the golden set
(fixed seed, so a golden always yields the same baseline).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_trt.compare.workspace import Workspace

STATS = ("max_confidence", "entropy", "top2_margin")
RESAMPLES = 200
SEED = 0
#: Above this many samples the SD of the mean is taken in closed form, ``std(v) / sqrt(n)``
#: (the value the bootstrap estimates, to within its +-5% resampling noise at 200 draws):
#: 200 resamples of 268,000 samples take 2.8 s of a 1 GiB golden's 4 s save.
BOOTSTRAP_MAX = 10_000
#: Drift is judged against ``max(bootstrap SD, SD_FLOOR * max(1, |golden mean|))``.
#: A near-constant output (a near-uniform classifier: entropy 6.91 +- 1.6e-12 over
#: the golden set) has a bootstrap SD at rounding level, so a change in the 7th
#: digit read as 68,105 SD.  The floor puts the smallest SD that counts at 0.1 % of
#: the statistic's scale: 0.001 for confidence and margin (probabilities, scale
#: 1), 0.0069 for the entropy of 1000 classes (scale ln 1000); 3 SD then still
#: catches a 0.3-point shift of mean confidence, the size calibration changes make.
SD_FLOOR = 1e-3
#: fixed bins of the per-sample histograms (bundle summaries, monitor specs): 24 over [0, 1] for confidence and
#: margin, over [0, ln C] for the entropy of C classes (values outside are counted in the end bins)
HISTOGRAM_BINS = 24


def histogram_top(stat: str, classes: int) -> float:
    """The upper end of ``stat``'s histogram range (the lower end is 0): ``ln C`` for entropy, else 1."""
    if stat == "entropy":
        return math.log(classes) if classes > 1 else 1.0
    return 1.0


def histogram(values: np.ndarray, top: float) -> np.ndarray:
    """Counts of ``values`` in :data:`HISTOGRAM_BINS` equal bins over ``[0, top]`` (int64)."""
    counts, _ = np.histogram(np.clip(values, 0.0, top), bins=HISTOGRAM_BINS, range=(0.0, top))
    return counts.astype(np.int64, copy=False)


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
    """Each statistic of :data:`STATS` per sample (see :func:`per_sample_top1`)."""
    return per_sample_top1(scores, logits=logits)[0]


def per_sample_top1(scores: np.ndarray, *, logits: bool,
                    work: Workspace | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each statistic of :data:`STATS` per sample (float64 arrays of N values).

    Vectorized and computed in the scores' own precision (float32 for float32
    and narrower outputs): with the row maximum ``m`` subtracted, ``e = exp(x - m)``
    lies in (0, 1] and ``s = sum(e)`` in [1, C], so nothing overflows; then
    max confidence ``1/s``, top-2 margin ``(1 - exp(x2 - m))/s`` and entropy
    ``log s - sum(e (x - m))/s``, a sum of terms of one sign (a row-wise dot product, :func:`row_dots`).
    No per-element log and no float64 copy of the batch (the float64 softmax was 77% of a
    check of a 1000-class output).  Rows with non-finite scores fall back to
    :func:`per_sample_reference`.  Also returns each sample's predicted class
    (the argmax it needs anyway), so a check does not compute it twice.
    ``work`` holds the batch-sized temporaries between calls (see
    :class:`~pytest_trt.compare.workspace.Workspace`).
    """
    x = np.asarray(scores)
    if x.dtype != np.float64:
        x = x.astype(np.float32, copy=False)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] == 0:
        return per_sample_reference(x, logits=logits), np.argmax(x, axis=-1).astype(np.int64)
    work = work or Workspace()
    rows = np.arange(x.shape[0])
    top = np.argmax(x, axis=-1)  # argmax + masked max: 6x cheaper than np.partition for the top two
    with np.errstate(all="ignore"):
        z = work.take("z", x.shape, x.dtype)
        np.subtract(x, x[rows, top][:, None], out=z)
        z[rows, top] = -np.inf
        second = z.max(axis=-1)  # x2 - m, <= 0
        z[rows, top] = 0.0
        if logits:
            e = work.take("e", x.shape, x.dtype)
            np.exp(z, out=e)
            s = e.sum(axis=-1)
            ez = row_dots(e, z)
            inv = 1.0 / s.astype(np.float64)
            stats = {
                "max_confidence": inv,
                "entropy": np.log(s.astype(np.float64)) - ez.astype(np.float64) * inv,
                "top2_margin": (1.0 - np.exp(second.astype(np.float64))) * inv,
            }
        else:
            logp = work.take("e", x.shape, x.dtype)
            np.log(x, out=logp)
            np.multiply(logp, x, out=logp)
            np.copyto(logp, 0.0, where=x <= 0)
            first = x[rows, top].astype(np.float64)
            stats = {"max_confidence": first, "entropy": -logp.sum(axis=-1).astype(np.float64),
                     "top2_margin": -second.astype(np.float64)}
    bad = ~(np.isfinite(stats["entropy"]) & np.isfinite(stats["max_confidence"]))
    if bad.any():  # -inf/nan scores: the exact float64 form, for those rows only
        slow = per_sample_reference(x[bad], logits=logits)
        for k in STATS:
            stats[k][bad] = slow[k]
    return stats, top.astype(np.int64, copy=False)


#: ``vecdot`` of numpy >= 2: the row-wise dot products in one call (one BLAS dot per row)
_VECDOT = getattr(np, "vecdot", None)


def row_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``sum(a * b, axis=-1)`` of two (N, C) arrays of one dtype, in that dtype, without an (N, C) temporary.

    Each row is a dot product accumulated in the rows' own precision, as ``(a * b).sum(axis=-1)`` is; on a
    (256, 1000) float32 batch it takes a third of the multiply-then-sum's time (one pass over the data, not
    three).
    """
    if _VECDOT is not None:
        return np.asarray(_VECDOT(a, b))
    return np.asarray(np.einsum("ij,ij->i", a, b))


def per_sample_reference(scores: np.ndarray, *, logits: bool) -> dict[str, np.ndarray]:
    """:func:`per_sample` through a float64 softmax: slow, kept for non-finite rows and as the reference."""
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
    return bootstrap_sds({"v": values}, resamples=resamples, seed=seed)["v"]


def bootstrap_sds(values: Mapping[str, np.ndarray], *, resamples: int = RESAMPLES,
                  seed: int = SEED) -> dict[str, float]:
    """:func:`bootstrap_sd` of several equally long statistics, drawing each resample's indices once.

    Every statistic gets the same draws it would get alone (same seed), so the
    figures are those of separate calls, for a third of the random numbers.
    """
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
    sizes = {v.size for v in arrays.values()}
    if len(sizes) > 1:
        return {k: bootstrap_sds({k: v}, resamples=resamples, seed=seed)[k] for k, v in arrays.items()}
    n = sizes.pop() if sizes else 0
    if n < 2:
        return {k: 0.0 for k in arrays}
    if n > BOOTSTRAP_MAX:
        return {k: float(v.std() / np.sqrt(n)) for k, v in arrays.items()}
    stacked = np.stack(list(arrays.values()))
    rng = np.random.default_rng(seed)
    means = np.empty((len(arrays), resamples))
    for i in range(resamples):
        means[:, i] = stacked[:, rng.integers(0, n, n)].mean(axis=1)
    return {k: float(means[j].std(ddof=1)) for j, k in enumerate(arrays)}


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
    return drift_of_means(base, {k: float(np.mean(v)) for k, v in obtained.items() if v.size})


def drift_of_means(base: DistributionBaseline, means: Mapping[str, float]) -> tuple[Drift, ...]:
    """Drifts of the obtained means of the statistics (a statistic without a mean has not moved)."""
    out = []
    for s in base.stats:
        mean = means.get(s.stat, s.mean)
        delta = abs(mean - s.mean)
        floor = sd_floor(s.mean)
        out.append(Drift(s.stat, s.mean, mean, s.sd, 0.0 if delta == 0 else delta / max(s.sd, floor), floor))
    return tuple(out)
