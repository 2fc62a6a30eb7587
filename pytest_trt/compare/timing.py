"""Latency and throughput drift between two measurements, with a confidence interval.

Pure functions over per-round statistics (no engine, no file): the golden
check and the benchmarks call them.  The estimate is the ratio of the
per-round medians (current / golden); its confidence interval comes from a
seeded bootstrap over the rounds of both measurements.  The per-round
statistics are contention-trimmed (25th-percentile latency, throughput of the
faster half of the runs; see :class:`~pytest_trt.timing.BenchmarkResult`):
other processes on a shared machine stretch some runs, not the fast ones.  A drift fails only
when the whole interval lies beyond the limit, so a noisy 2-core CI machine
does not flap, while a real 2x slowdown fails every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["DriftVerdict", "Measured", "bootstrap_ratio", "timing_drift"]


class Measured(Protocol):
    """What a drift check needs of a measurement (a :class:`~pytest_trt.timing.BenchmarkResult`)."""

    @property
    def round_floor_ms(self) -> tuple[float, ...]: ...

    @property
    def round_throughputs(self) -> tuple[float, ...]: ...


@dataclass(frozen=True)
class DriftVerdict:
    metric: str  # "latency" or "throughput"
    golden: float
    current: float
    ratio: float  # current / golden
    low: float  # confidence interval of the ratio
    high: float
    limit: float  # allowed relative change (0.10 = 10 %)
    confidence: float
    failed: bool

    def line(self) -> str:
        unit = "ms" if self.metric == "latency" else "samples/s"
        change = self.ratio - 1.0
        bound = f"{'+' if self.metric == 'latency' else '-'}{self.limit:.0%}"
        state = "REGRESSION" if self.failed else "ok"
        return (f"[{state}] {self.metric}: {self.golden:.4g} -> {self.current:.4g} {unit} ({change:+.1%}, "
                f"{self.confidence:.0%} CI of the ratio {self.low:.3f}..{self.high:.3f}; allowed {bound})")


def bootstrap_ratio(golden: Sequence[float], current: Sequence[float], *, confidence: float = 0.95,
                    resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(median(current)/median(golden), CI low, CI high) by resampling the rounds of both."""
    g, c = np.asarray(golden, dtype=np.float64), np.asarray(current, dtype=np.float64)
    if g.size == 0 or c.size == 0 or np.any(g <= 0) or np.any(c <= 0):
        raise ValueError(f"drift needs positive per-round values on both sides; got golden {list(g)}, "
                         f"current {list(c)}")
    rng = np.random.default_rng(seed)
    gs = np.median(g[rng.integers(0, g.size, size=(resamples, g.size))], axis=1)
    cs = np.median(c[rng.integers(0, c.size, size=(resamples, c.size))], axis=1)
    ratios = cs / gs
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return float(np.median(c) / np.median(g)), float(low), float(high)


def timing_drift(golden: Measured, current: Measured, *, latency_drift: float | None = 0.10,
                 throughput_drift: float | None = 0.15, confidence: float = 0.95) -> list[DriftVerdict]:
    """One verdict per metric whose limit is set.

    Latency fails when the interval's *low* end exceeds ``1 + latency_drift``
    (certainly slower by more than allowed); throughput fails when the
    interval's *high* end is below ``1 - throughput_drift``.
    """
    out: list[DriftVerdict] = []
    if latency_drift is not None:
        g, c = golden.round_floor_ms, current.round_floor_ms
        ratio, low, high = bootstrap_ratio(g, c, confidence=confidence)
        out.append(DriftVerdict("latency", float(np.median(g)), float(np.median(c)), ratio, low, high,
                                latency_drift, confidence, low > 1.0 + latency_drift))
    if throughput_drift is not None:
        g, c = golden.round_throughputs, current.round_throughputs
        ratio, low, high = bootstrap_ratio(g, c, confidence=confidence)
        out.append(DriftVerdict("throughput", float(np.median(g)), float(np.median(c)), ratio, low, high,
                                throughput_drift, confidence, high < 1.0 - throughput_drift))
    return out
