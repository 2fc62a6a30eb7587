"""Classifier figures of one output kept as counts and running moments: memory independent of the samples.

A golden check of millions of samples needs, per classifier output, only:
agreement and accuracy counts (overall and per tag), each statistic of
:data:`~pytest_trt.compare.distribution.STATS` as a count, a sum, a sum of
squared deviations (merged batch by batch, Chan et al.) and its fixed-bin
histogram, the first :data:`~pytest_trt.compare.distribution.BOOTSTRAP_MAX`
values (the bootstrap SD is taken over them while the run is no longer than
that; above it the SD of the mean is the closed form ``sqrt(M2 / n) / sqrt(n)``)
and, for at most ``MAX_CONFUSION_CLASSES`` classes, the (label, predicted) counts.
Each figure equals the one computed from the whole per-sample arrays (counts
exactly; means and SDs to rounding).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_trt.compare import distribution, metrics

#: confusion counts are kept for at most this many classes (ImageNet's 1000 would be too many cells)
MAX_CONFUSION_CLASSES = 100


#: values a statistic collects before its moments and histogram take them in (bounded: 512 KiB per statistic):
#: per 256-sample batch, the histogram's edges and the moment merge cost more than the values themselves
PENDING = 1 << 16


class StreamingStat:
    """One per-sample statistic: count, compensated sum, sum of squared deviations, histogram, first values."""

    def __init__(self, top: float) -> None:
        self.top = top  # the histogram's upper end (see :func:`distribution.histogram_top`)
        self._n = 0
        self._sum = 0.0
        self._carry = 0.0  # Neumaier compensation of _sum
        self._mean = 0.0  # running mean for the M2 merge
        self._m2 = 0.0
        self._counts = np.zeros(distribution.HISTOGRAM_BINS, np.int64)
        self._head: list[np.ndarray] = []
        self._kept = 0
        self._pending = np.empty(PENDING, np.float64)
        self._fill = 0

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64).reshape(-1)
        if self._kept < distribution.BOOTSTRAP_MAX and v.size:
            take = v[: distribution.BOOTSTRAP_MAX - self._kept].copy()
            self._head.append(take)
            self._kept += int(take.size)
        while v.size:
            k = min(v.size, PENDING - self._fill)
            self._pending[self._fill : self._fill + k] = v[:k]
            self._fill += k
            v = v[k:]
            if self._fill == PENDING:
                self._flush()

    def _flush(self) -> None:
        """Merge the pending values into the moments (Chan et al.) and the histogram."""
        nb = self._fill
        if not nb:
            return
        v = self._pending[:nb]
        self._fill = 0
        total = float(v.sum())
        mb = total / nb
        m2b = float(np.square(v - mb).sum())
        n = self._n + nb
        d = mb - self._mean
        self._mean += d * nb / n
        self._m2 += m2b + d * d * self._n * nb / n
        s = self._sum + total
        self._carry += (self._sum - s) + total if abs(self._sum) >= abs(total) else (total - s) + self._sum
        self._sum = s
        self._n = n
        self._counts += distribution.histogram(v, self.top)

    @property
    def n(self) -> int:
        return self._n + self._fill

    @property
    def m2(self) -> float:
        self._flush()
        return self._m2

    @property
    def counts(self) -> np.ndarray:
        """Counts in :data:`~pytest_trt.compare.distribution.HISTOGRAM_BINS` bins over ``[0, top]``."""
        self._flush()
        return self._counts

    @property
    def mean(self) -> float:
        self._flush()
        return (self._sum + self._carry) / self._n if self._n else 0.0

    def head(self) -> np.ndarray:
        """The first :data:`~pytest_trt.compare.distribution.BOOTSTRAP_MAX` values."""
        return np.concatenate(self._head) if self._head else np.zeros(0)

    def sd_of_mean(self) -> float:
        """What :func:`distribution.bootstrap_sds` gives for the whole run (bootstrap up to BOOTSTRAP_MAX)."""
        n = self.n
        if n < 2:
            return 0.0
        if n <= distribution.BOOTSTRAP_MAX:
            return distribution.bootstrap_sd(self.head())
        return math.sqrt(self.m2 / n) / math.sqrt(n)


@dataclass
class TagTally:
    count: int = 0
    agree: int = 0
    correct: int = 0
    golden_correct: int = 0


@dataclass
class ClassifierTally:
    """Counts of one classifier output over the samples seen so far (obtained vs golden vs labels)."""

    classes: int = 0  # C of float (N, C) scores; 0 for class indices
    samples: int = 0  # samples with a predicted class
    compared: int = 0  # of those, with a golden prediction
    agree: int = 0
    labelled: int = 0
    correct: int = 0
    golden_correct: int = 0
    stats: dict[str, StreamingStat] = field(default_factory=dict)
    tags: dict[str, TagTally] = field(default_factory=dict)
    confusion: dict[tuple[int, int], int] | None = None

    def add_stats(self, values: Mapping[str, np.ndarray]) -> None:
        for k, v in values.items():
            stat = self.stats.get(k)
            if stat is None:
                stat = self.stats[k] = StreamingStat(distribution.histogram_top(k, self.classes))
            stat.add(v)

    def add(self, predicted: np.ndarray, golden: np.ndarray | None, labels: np.ndarray | None,
            tags: Sequence[str] | None) -> None:
        """One batch: predicted classes, the golden's (or None), labels (or None), tag strings (or None)."""
        o = np.asarray(predicted).reshape(-1)
        n = int(o.size)
        self.samples += n
        same = None
        if golden is not None:
            g = np.asarray(golden).reshape(-1)
            same = o == g
            self.compared += n
            self.agree += int(np.count_nonzero(same))
        right = gright = None
        if labels is not None:
            lab = np.asarray(labels).reshape(-1)
            right = o == lab
            self.labelled += n
            self.correct += int(np.count_nonzero(right))
            if golden is not None:
                gright = g == lab
                self.golden_correct += int(np.count_nonzero(gright))
            if self.stats and self.classes <= MAX_CONFUSION_CLASSES:
                self._confuse(o, lab)
        if tags is not None:
            for tag, idx in metrics.split_tags(tags).items():
                t = self.tags.setdefault(tag, TagTally())
                t.count += int(idx.size)
                if same is not None:
                    t.agree += int(np.count_nonzero(same[idx]))
                if right is not None:
                    t.correct += int(np.count_nonzero(right[idx]))
                if gright is not None:
                    t.golden_correct += int(np.count_nonzero(gright[idx]))

    def _confuse(self, predicted: np.ndarray, labels: np.ndarray) -> None:
        table = self.confusion if self.confusion is not None else {}
        pairs, counts = np.unique(np.stack([labels.astype(np.int64), predicted.astype(np.int64)]), axis=1,
                                  return_counts=True)
        for (a, b), c in zip(pairs.T.tolist(), counts.tolist(), strict=True):
            table[(a, b)] = table.get((a, b), 0) + c
        self.confusion = table

    # figures, as metrics.agreement / accuracy / per_tag give them for the whole arrays
    def agreement(self) -> float:
        return self.agree / self.compared if self.compared else 1.0

    def accuracy(self) -> float:
        return self.correct / self.labelled if self.labelled else 1.0

    def golden_accuracy(self) -> float:
        return self.golden_correct / self.labelled if self.labelled else 1.0

    def per_tag(self, *, labelled: bool) -> tuple[metrics.TagMetrics, ...]:
        return tuple(
            metrics.TagMetrics(tag, t.count, t.agree / t.count,
                               t.correct / t.count if labelled else None,
                               t.golden_correct / t.count if labelled else None)
            for tag, t in sorted(self.tags.items()))

    def tag_accuracy(self) -> dict[str, float]:
        return {tag: t.correct / t.count for tag, t in sorted(self.tags.items())}

    def means(self) -> dict[str, float]:
        return {k: s.mean for k, s in self.stats.items()}

    def confusion_rows(self) -> list[list[int]] | None:
        """Sparse ``[label, predicted, count]`` rows sorted by label then prediction (None: too many classes)."""
        if self.confusion is None or self.classes > MAX_CONFUSION_CLASSES:
            return None
        return [[a, b, c] for (a, b), c in sorted(self.confusion.items())]
