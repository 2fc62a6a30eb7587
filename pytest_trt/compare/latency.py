"""Latency and throughput drift between two measurements, with a confidence interval.

Pure functions over per-round statistics (no engine, no file): the golden
check and the benchmarks call them.  The estimate is the ratio of the
medians of per-round statistics (current / golden); its confidence interval
comes from a seeded bootstrap over the rounds of both measurements.  The per-round
statistics are contention-trimmed (25th-percentile latency, throughput of the
faster half of the runs; see :class:`~pytest_trt.engines.benchmark.BenchmarkResult`):
other processes on a shared machine stretch some runs, not the fast ones.
When both measurements were taken on the CPU clock, the CPU time each run
consumed is compared instead of wall time: a machine busier than when the
snapshot was taken stretches wall time, not the CPU time a run needs, while a
slower engine needs more of it.  A drift fails only
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
    """What a drift check needs of a measurement (a :class:`~pytest_trt.engines.benchmark.BenchmarkResult`)."""

    @property
    def round_floor_ms(self) -> tuple[float, ...]: ...

    @property
    def round_throughputs(self) -> tuple[float, ...]: ...

    @property
    def round_cpu_floor_ms(self) -> tuple[float, ...]: ...

    @property
    def batch(self) -> int: ...


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
    cpu_time: bool = False  # compared in CPU time per run (monotonic clock on both sides)

    def line(self) -> str:
        unit = "ms" if self.metric == "latency" else "samples/s"
        change = self.ratio - 1.0
        bound = f"{'+' if self.metric == 'latency' else '-'}{self.limit:.0%}"
        state = "REGRESSION" if self.failed else "ok"
        units = ", CPU time" if self.cpu_time else ""
        return (f"[{state}] {self.metric}: {self.golden:.4g} -> {self.current:.4g} {unit} (ratio {self.ratio:.3f} "
                f"= {change:+.1%}{units}, {self.confidence:.0%} CI {self.low:.3f}..{self.high:.3f}; allowed {bound})")


def bootstrap_ratio(golden: Sequence[float] | np.ndarray, current: Sequence[float] | np.ndarray, *,
                    confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
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
    cpu = bool(golden.round_cpu_floor_ms) and bool(current.round_cpu_floor_ms)
    if cpu:  # CPU time per run: what a busy machine does not stretch
        g_lat, c_lat = np.asarray(golden.round_cpu_floor_ms), np.asarray(current.round_cpu_floor_ms)
        g_thr, c_thr = golden.batch * 1e3 / g_lat, current.batch * 1e3 / c_lat
    else:
        g_lat, c_lat = np.asarray(golden.round_floor_ms), np.asarray(current.round_floor_ms)
        g_thr, c_thr = np.asarray(golden.round_throughputs), np.asarray(current.round_throughputs)
    if latency_drift is not None:
        ratio, low, high = bootstrap_ratio(g_lat, c_lat, confidence=confidence)
        out.append(DriftVerdict("latency", float(np.median(g_lat)), float(np.median(c_lat)), ratio, low, high,
                                latency_drift, confidence, low > 1.0 + latency_drift, cpu))
    if throughput_drift is not None:
        ratio, low, high = bootstrap_ratio(g_thr, c_thr, confidence=confidence)
        out.append(DriftVerdict("throughput", float(np.median(g_thr)), float(np.median(c_thr)), ratio, low, high,
                                throughput_drift, confidence, high < 1.0 - throughput_drift, cpu))
    return out
