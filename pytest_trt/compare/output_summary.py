"""The compact output summary a golden check stores in the bundle, for the upgrade report's pictures.

(Computed where the check runs, so it lives with the comparison; :mod:`pytest_trt.upgrade.outputs`
re-exports it for the upgrade report.)

A bundle must stay small, so it never holds outputs; per output it holds the
figures the check computed (the metrics against the golden, with their
thresholds), fixed-bin histograms of the three per-sample classifier
statistics and, where labels exist, the sparse (label, predicted, count)
confusion counts.  Two runs of one suite then compare by bins and counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from pytest_trt.compare import distribution
from pytest_trt.compare.accumulate import OutputAccumulator
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet
from pytest_trt.compare.verdict import OutputMetrics

SUMMARY_SCHEMA = 1
BINS = distribution.HISTOGRAM_BINS
#: confusion counts are kept for at most this many classes (ImageNet's 1000 would be too many cells)
MAX_CONFUSION_CLASSES = 100


def _histogram(values: np.ndarray, hi: float) -> dict[str, Any]:
    return {"range": [0.0, hi], "counts": [int(c) for c in distribution.histogram(values, hi)]}


def _confusion(predicted: np.ndarray, labels: np.ndarray, classes: int) -> list[list[int]] | None:
    if classes > MAX_CONFUSION_CLASSES or predicted.shape != labels.shape:
        return None
    pairs, counts = np.unique(np.stack([labels.astype(np.int64), predicted.astype(np.int64)]), axis=1,
                              return_counts=True)
    return [[int(a), int(b), int(c)] for (a, b), c in zip(pairs.T, counts, strict=True)]


def summarize_output(stream: OutputAccumulator, metrics: OutputMetrics, thresholds: Thresholds,
                     labels: np.ndarray | None) -> dict[str, Any]:
    """One output's summary from its :class:`~pytest_trt.compare.accumulate.OutputAccumulator` and metrics."""
    out: dict[str, Any] = {"metrics": metrics.to_dict(), "thresholds": asdict(thresholds)}
    stats = stream.per_sample_stats() if stream.classifier else {}
    if stats:
        classes = int(stream.sample_shape[-1]) if stream.sample_shape else 0
        out["classes"] = classes
        out["histograms"] = {
            k: _histogram(v, distribution.histogram_top(k, classes)) for k, v in sorted(stats.items())
        }
        top1 = stream.obtained_top1()
        if top1 is not None and labels is not None:
            out["confusion"] = _confusion(np.asarray(top1).reshape(-1), np.asarray(labels).reshape(-1), classes)
    return out


def summarize_outputs(streams: Mapping[str, OutputAccumulator], metrics: Mapping[str, OutputMetrics],
                      limits: ThresholdSet, labels: np.ndarray | None) -> dict[str, Any]:
    """``{"schema": 1, "outputs": {name: summary}}`` for every output the check compared."""
    return {
        "schema": SUMMARY_SCHEMA,
        "outputs": {name: summarize_output(streams[name], m, limits.for_output(name), labels)
                    for name, m in sorted(metrics.items())},
    }
