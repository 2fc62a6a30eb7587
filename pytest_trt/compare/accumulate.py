"""Streaming accumulation of one output against its golden, batch by batch.

Neither the obtained nor the golden outputs are ever held whole: each batch
updates the elementwise sums (:class:`~pytest_trt.compare.metrics.ElementAccumulator`)
and, for class scores, the per-sample classifier figures (a few numbers per
sample), which are all that is kept until the end.  Where the batches come
from (an engine, given arrays, an HDF5 file) is the golden workflow's business
(:mod:`pytest_trt.golden.running`); this module only compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_trt.compare import distribution, metrics
from pytest_trt.compare.verdict import OutputMetrics
from pytest_trt.compare.workspace import Workspace, read_rows
from pytest_trt.errors import GoldenError


class ArrayLike(Protocol):
    """numpy arrays and h5py datasets alike."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    def __getitem__(self, key: Any) -> Any: ...


@dataclass
class OutputAccumulator:
    """Accumulates one output: elementwise stats vs golden, per-sample classifier figures."""

    name: str
    golden: ArrayLike | None
    logits: bool | None = None  # from the golden's baseline; decided on the first batch otherwise
    elements: metrics.ElementAccumulator = field(default_factory=metrics.ElementAccumulator)
    classifier: bool = False
    declared: bool | None = None  # classifier= of check(), or the golden's recorded decision; None: detect
    max_label: int | None = None  # the labelled dataset's largest label, evidence for detection
    strict: bool = True  # False in update mode: a changed shape only drops the comparison
    sample_shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    _o_top1: list[np.ndarray] = field(default_factory=list)
    _g_top1: list[np.ndarray] = field(default_factory=list)
    _stats: dict[str, list[np.ndarray]] = field(default_factory=dict)
    _work: Workspace = field(default_factory=Workspace)

    def update(self, start: int, obtained: np.ndarray) -> None:
        """Add the batch of samples ``start ..`` (its golden rows are read from :attr:`golden`)."""
        if self.dtype is None:
            self._first(obtained)
        if self.classifier and np.issubdtype(obtained.dtype, np.floating):
            if self.logits is None:
                self.logits = not distribution.looks_like_probabilities(obtained)
            stats, top = distribution.per_sample_top1(obtained, logits=self.logits, work=self._work)
            for k, v in stats.items():
                self._stats.setdefault(k, []).append(v)
            self._o_top1.append(top)
        elif self.classifier:
            self._o_top1.append(metrics.top1(obtained))
        if self.golden is None:
            return
        gold = read_rows(self.golden, start, obtained.shape[0], self._work, "golden")
        self.elements.update(obtained, gold)
        if self.classifier:
            self._g_top1.append(metrics.top1(gold))

    def _first(self, obtained: np.ndarray) -> None:
        self.sample_shape, self.dtype = tuple(obtained.shape[1:]), obtained.dtype
        self.classifier = self._decide(obtained)
        if self.golden is not None and tuple(self.golden.shape[1:]) != self.sample_shape:
            if not self.strict:
                self.golden = None
                return
            raise GoldenError(
                f"output {self.name!r}: the engine gives samples of shape {self.sample_shape}, "
                f"the golden holds {tuple(self.golden.shape[1:])}", output=self.name,
            )

    def _decide(self, first: np.ndarray) -> bool:
        if self.declared is None:
            return metrics.looks_like_class_scores(first, self.max_label, self.name)
        if self.declared and not metrics.is_classifier(self.sample_shape, first.dtype):
            raise GoldenError(
                f"output {self.name!r} is declared a classifier but gives samples of shape {self.sample_shape} "
                f"({first.dtype}); class scores are float (C,) per sample, or integer class indices (); "
                "drop it from classifier=", output=self.name,
            )
        return self.declared

    def per_sample_stats(self) -> dict[str, np.ndarray]:
        """Each classifier statistic (:data:`~pytest_trt.compare.distribution.STATS`) per sample so far."""
        return {k: np.concatenate(v) for k, v in self._stats.items()}

    def obtained_top1(self) -> np.ndarray | None:
        return np.concatenate(self._o_top1) if self._o_top1 else None

    def result(self, samples: int, labels: np.ndarray | None, tags: Sequence[str] | None,
               base: distribution.DistributionBaseline | None) -> OutputMetrics:
        """Figures of obtained vs golden (requires a golden)."""
        stats = self.elements.result()
        if not self.classifier or not self._o_top1:
            return OutputMetrics(self.name, samples, stats)
        o, g = np.concatenate(self._o_top1), np.concatenate(self._g_top1)
        drift = distribution.drift(base, self.per_sample_stats()) if base is not None and self._stats else ()
        return OutputMetrics(
            self.name, samples, stats,
            top1_agreement=metrics.agreement(o, g),
            accuracy=None if labels is None else metrics.accuracy(o, labels),
            golden_accuracy=None if labels is None else metrics.accuracy(g, labels),
            tags=metrics.per_tag(o, g, labels, tags) if tags is not None else (),
            drift=drift,
        )

    def as_golden(self, samples: int, labels: np.ndarray | None, tags: Sequence[str] | None,
                  base: distribution.DistributionBaseline | None) -> OutputMetrics:
        """The figures a check of these very outputs against themselves would compute: which metrics the next
        check of a snapshot made from them can evaluate (an update refuses thresholds it could not)."""
        same = metrics.ElementStats(samples, 0.0, 0.0, 0.0, 1.0, 0.0, 0, 0)
        o = self.obtained_top1()
        if not self.classifier or o is None:
            return OutputMetrics(self.name, samples, same)
        drift = distribution.drift(base, self.per_sample_stats()) if base is not None and self._stats else ()
        acc = None if labels is None else metrics.accuracy(o, labels)
        return OutputMetrics(self.name, samples, same, top1_agreement=1.0, accuracy=acc, golden_accuracy=acc,
                             tags=metrics.per_tag(o, o, labels, tags) if tags is not None else (), drift=drift)

    def baseline(self, labels: np.ndarray | None, tags: Sequence[str] | None) -> dict[str, Any]:
        """Metric baselines of these outputs as a new golden: accuracy (overall, per tag), distribution."""
        out: dict[str, Any] = {"classifier": self.classifier}
        o = self.obtained_top1()
        if o is not None and labels is not None:
            out["accuracy"] = metrics.accuracy(o, labels)
            if tags is not None:
                groups = metrics.split_tags(tags)
                out["tag_accuracy"] = {t: metrics.accuracy(o[i], labels[i]) for t, i in groups.items()}
        if self._stats:
            stats = self.per_sample_stats()
            sds = distribution.bootstrap_sds({k: stats[k] for k in distribution.STATS})
            out["distribution"] = distribution.DistributionBaseline(
                bool(self.logits),
                tuple(distribution.StatBaseline(k, float(stats[k].mean()), sds[k]) for k in distribution.STATS),
            ).to_dict()
        return out


def baseline_of(baselines: Any, output: str) -> distribution.DistributionBaseline | None:
    """The distribution baseline a golden recorded for ``output`` (``baselines`` as stored), if any."""
    d = baselines.get(output, {}).get("distribution")
    return distribution.DistributionBaseline.from_dict(d) if d else None


def accumulator_for(name: str, golden: ArrayLike | None, baselines: Any, declared: bool | None,
                    max_label: int | None, *, strict: bool) -> OutputAccumulator:
    """An accumulator whose classifier decision is: ``declared``, else the golden's recorded one, else detected."""
    base = baseline_of(baselines, name)
    recorded = baselines.get(name, {})
    decision = declared
    if decision is None and "classifier" in recorded:
        decision = bool(recorded["classifier"])
    elif decision is None and base is not None:  # goldens written before the decision was recorded
        decision = True
    return OutputAccumulator(name, golden, logits=None if base is None else base.logits, strict=strict,
                             declared=decision, max_label=max_label)
