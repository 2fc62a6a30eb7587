"""Comparison of engine outputs with golden outputs.

``thresholds`` (what may change, numpy-free so the pytest hooks can import it
cheaply), ``metrics`` and ``distribution`` (pure numpy, float64 accumulation),
``assess`` (metrics against thresholds, refusals), ``verdict`` (the typed
result: every metric with value, threshold and status) and ``render`` (the
failure text).
Nothing is imported here so that ``import pytest_trt.compare.thresholds``
does not pull in numpy.
"""
