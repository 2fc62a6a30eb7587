"""The compact output summary a golden check stores in the bundle, for the upgrade report's pictures.

(Computed where the check runs, so it lives with the comparison; :mod:`pytest_trt.upgrade.outputs`
re-exports it for the upgrade report.)

A bundle must stay small, so it never holds outputs; per output it holds the
figures the check computed (the metrics against the golden, with their
thresholds), fixed-bin histograms of the three per-sample classifier
statistics and, where labels exist, the sparse (label, predicted, count)
confusion counts, all counted as the batches streamed by
(:class:`~pytest_trt.compare.tally.ClassifierTally`).  Two runs of one suite then compare by bins and counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from pytest_trt.compare import distribution, tally
from pytest_trt.compare.accumulate import OutputAccumulator
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet
from pytest_trt.compare.verdict import OutputMetrics

SUMMARY_SCHEMA = 1
BINS = distribution.HISTOGRAM_BINS
#: confusion counts are kept for at most this many classes (ImageNet's 1000 would be too many cells)
MAX_CONFUSION_CLASSES = tally.MAX_CONFUSION_CLASSES


def summarize_output(stream: OutputAccumulator, metrics: OutputMetrics, thresholds: Thresholds) -> dict[str, Any]:
    """One output's summary from its :class:`~pytest_trt.compare.accumulate.OutputAccumulator` and metrics."""
    out: dict[str, Any] = {"metrics": metrics.to_dict(), "thresholds": asdict(thresholds)}
    t = stream.tally
    if stream.classifier and t.stats:
        out["classes"] = t.classes
        out["histograms"] = {k: {"range": [0.0, s.top], "counts": [int(c) for c in s.counts]}
                             for k, s in sorted(t.stats.items())}
        if stream.labels is not None:
            out["confusion"] = t.confusion_rows()
    return out


def summarize_outputs(streams: Mapping[str, OutputAccumulator], metrics: Mapping[str, OutputMetrics],
                      limits: ThresholdSet) -> dict[str, Any]:
    """``{"schema": 1, "outputs": {name: summary}}`` for every output the check compared."""
    return {
        "schema": SUMMARY_SCHEMA,
        "outputs": {name: summarize_output(streams[name], m, limits.for_output(name))
                    for name, m in sorted(metrics.items())},
    }
