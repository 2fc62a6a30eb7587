"""Streaming accumulation of one output against its golden, batch by batch.

Neither the obtained nor the golden outputs are ever held whole: each batch
updates the elementwise sums (:class:`~pytest_trt.compare.metrics.ElementAccumulator`)
and, for classifiers, the counts and running moments of
:class:`~pytest_trt.compare.tally.ClassifierTally`, read with the batch's
labels and tags rows: memory does not grow with the number of samples.  Where the batches come
from (an engine, given arrays, an HDF5 file) is the golden workflow's business
(:mod:`pytest_trt.golden.running`); this module only compares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_trt.compare import distribution, metrics
from pytest_trt.compare.tally import ClassifierTally
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
    """Accumulates one output: elementwise stats vs golden, classifier counts (with ``labels``/``tags`` rows)."""

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
    labels: ArrayLike | None = None  # (N,) class labels of the golden dataset, read per batch
    tags: ArrayLike | Sequence[str] | None = None  # N tag strings, read per batch
    tally: ClassifierTally = field(default_factory=ClassifierTally)
    _work: Workspace = field(default_factory=Workspace)

    def update(self, start: int, obtained: np.ndarray) -> None:
        """Add the batch of samples ``start ..`` (its golden rows are read from :attr:`golden`)."""
        if self.dtype is None:
            self._first(obtained)
        top = None
        if self.classifier and np.issubdtype(obtained.dtype, np.floating):
            if self.logits is None:
                self.logits = not distribution.looks_like_probabilities(obtained)
            stats, top = distribution.per_sample_top1(obtained, logits=self.logits, work=self._work)
            self.tally.add_stats(stats)
        elif self.classifier:
            top = metrics.top1(obtained)
        gold = None
        if self.golden is not None:
            gold = read_rows(self.golden, start, obtained.shape[0], self._work, "golden")
            self.elements.update(obtained, gold)
        if top is not None:
            n = obtained.shape[0]
            labels = None if self.labels is None else read_rows(self.labels, start, n, self._work, "labels")
            self.tally.add(top, None if gold is None else metrics.top1(gold), labels,
                           None if self.tags is None else text_rows(self.tags, start, n))

    def _first(self, obtained: np.ndarray) -> None:
        self.sample_shape, self.dtype = tuple(obtained.shape[1:]), obtained.dtype
        self.classifier = self._decide(obtained)
        self.tally.classes = int(self.sample_shape[-1]) if self.sample_shape else 0
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

    def result(self, samples: int, base: distribution.DistributionBaseline | None) -> OutputMetrics:
        """Figures of obtained vs golden (requires a golden)."""
        stats = self.elements.result()
        t = self.tally
        if not self.classifier or not t.samples:
            return OutputMetrics(self.name, samples, stats)
        labelled = self.labels is not None
        drift = distribution.drift_of_means(base, t.means()) if base is not None and t.stats else ()
        return OutputMetrics(
            self.name, samples, stats,
            top1_agreement=t.agreement(),
            accuracy=t.accuracy() if labelled else None,
            golden_accuracy=t.golden_accuracy() if labelled else None,
            tags=t.per_tag(labelled=labelled) if self.tags is not None else (),
            drift=drift,
        )

    def as_golden(self, samples: int, base: distribution.DistributionBaseline | None) -> OutputMetrics:
        """The figures a check of these very outputs against themselves would compute: which metrics the next
        check of a snapshot made from them can evaluate (an update refuses thresholds it could not)."""
        same = metrics.ElementStats(samples, 0.0, 0.0, 0.0, 1.0, 0.0, 0, 0)
        t = self.tally
        if not self.classifier or not t.samples:
            return OutputMetrics(self.name, samples, same)
        labelled = self.labels is not None
        drift = distribution.drift_of_means(base, t.means()) if base is not None and t.stats else ()
        acc = t.accuracy() if labelled else None
        tags = tuple(metrics.TagMetrics(tag, c.count, 1.0, c.correct / c.count if labelled else None,
                                        c.correct / c.count if labelled else None)
                     for tag, c in sorted(t.tags.items())) if self.tags is not None else ()
        return OutputMetrics(self.name, samples, same, top1_agreement=1.0, accuracy=acc, golden_accuracy=acc,
                             tags=tags, drift=drift)

    def baseline(self) -> dict[str, Any]:
        """Metric baselines of these outputs as a new golden: accuracy (overall, per tag), distribution."""
        out: dict[str, Any] = {"classifier": self.classifier}
        t = self.tally
        if t.samples and self.labels is not None:
            out["accuracy"] = t.accuracy()
            if self.tags is not None:
                out["tag_accuracy"] = t.tag_accuracy()
        if t.stats:
            out["distribution"] = distribution.DistributionBaseline(
                bool(self.logits),
                tuple(distribution.StatBaseline(k, t.stats[k].mean, t.stats[k].sd_of_mean())
                      for k in distribution.STATS),
            ).to_dict()
        return out


def text_rows(source: Any, start: int, count: int) -> list[str]:
    """Rows ``start .. start + count`` of a string array (an h5py dataset of bytes, or a sequence of str)."""
    return [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in source[start : start + count]]


def baseline_of(baselines: Any, output: str) -> distribution.DistributionBaseline | None:
    """The distribution baseline a golden recorded for ``output`` (``baselines`` as stored), if any."""
    d = baselines.get(output, {}).get("distribution")
    return distribution.DistributionBaseline.from_dict(d) if d else None


def accumulator_for(name: str, golden: ArrayLike | None, baselines: Any, declared: bool | None,
                    max_label: int | None, *, strict: bool, labels: ArrayLike | None = None,
                    tags: ArrayLike | Sequence[str] | None = None) -> OutputAccumulator:
    """An accumulator whose classifier decision is: ``declared``, else the golden's recorded one, else detected."""
    base = baseline_of(baselines, name)
    recorded = baselines.get(name, {})
    decision = declared
    if decision is None and "classifier" in recorded:
        decision = bool(recorded["classifier"])
    elif decision is None and base is not None:  # goldens written before the decision was recorded
        decision = True
    return OutputAccumulator(name, golden, logits=None if base is None else base.logits, strict=strict,
                             declared=decision, max_label=max_label, labels=labels, tags=tags)
