"""Comparison of engine outputs with golden outputs.

``thresholds`` (what may change, numpy-free so the pytest hooks can import it
cheaply), ``metrics`` and ``distribution`` (pure numpy; elementwise sums in
float64, classifier statistics vectorized in the scores' precision),
``accumulate`` (one output streamed batch by batch against its golden, with
``workspace`` buffers reused between batches), ``rules`` (the verdict as a
table: one row per threshold, saying how its metric is read, judged and
rendered), ``assess`` (the rows against an output's metrics, refusals, the
verdict), ``verdict`` (the typed result: every metric with value, threshold
and status), ``render`` (the failure text and per-output table, drawn from the
rows), ``summary`` (the compact per-output summary kept in the audit bundle)
and ``timing`` (latency/throughput drift).
Nothing is imported here so that ``import pytest_trt.compare.thresholds``
does not pull in numpy.
"""
