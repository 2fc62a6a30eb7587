"""Latency and throughput of an engine: :func:`benchmark` and its :class:`BenchmarkResult`.

A runner that owns a CUDA stream offers ``timer()`` (CUDA events recorded on
its stream, so GPU work is timed, not the Python around it); every other
runner is timed with the monotonic ``time.perf_counter_ns`` clock (a :class:`Clock`, which a caller may
replace: tests inject a deterministic one, so no test asserts on real time).  Timed
runs go through ``Engine.run``, the path tests really take.  Results are
kept per round (and, on the CPU clock, with the CPU time of every run): the
drift check (:mod:`pytest_trt.compare.latency`) compares per-round statistics
of two measurements, so one noisy round cannot decide.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["SYSTEM_CLOCK", "BenchmarkResult", "Clock", "MonotonicTimer", "SystemClock", "Timer", "benchmark"]


class Clock(Protocol):
    """Where the CPU-side timing reads the time: wall (monotonic) and process CPU time, in nanoseconds."""

    def wall_ns(self) -> int: ...

    def cpu_ns(self) -> int: ...


class SystemClock:
    """The real clocks: ``time.perf_counter_ns`` and ``time.process_time_ns`` (every thread of the process)."""

    def wall_ns(self) -> int:
        return time.perf_counter_ns()

    def cpu_ns(self) -> int:
        return time.process_time_ns()


SYSTEM_CLOCK: Clock = SystemClock()


class Timer(Protocol):
    """Times one call: ``start()`` before it, ``stop()`` after it returns (milliseconds)."""

    name: str

    def start(self) -> None: ...

    def stop(self) -> float: ...


class MonotonicTimer:
    name = "monotonic"

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._t0 = 0

    def start(self) -> None:
        self._t0 = self._clock.wall_ns()

    def stop(self) -> float:
        return (self._clock.wall_ns() - self._t0) / 1e6


@dataclass(frozen=True)
class BenchmarkResult:
    """Latencies in milliseconds per round, and the statistics users read."""

    clock: str
    batch: int
    rounds: tuple[tuple[float, ...], ...]
    #: wall seconds of each round's timed loop (throughput counts the Python between runs too)
    round_seconds: tuple[float, ...]
    device: Mapping[str, Any] = field(default_factory=dict)
    #: per round, the CPU time (ms) the process spent in each run; monotonic clock only, empty on a GPU
    cpu_rounds: tuple[tuple[float, ...], ...] = ()

    @property
    def latencies_ms(self) -> np.ndarray:
        return np.concatenate([np.asarray(r, dtype=np.float64) for r in self.rounds])

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))

    @property
    def median_ms(self) -> float:
        return self.percentile(50)

    @property
    def p90_ms(self) -> float:
        return self.percentile(90)

    @property
    def p99_ms(self) -> float:
        return self.percentile(99)

    @property
    def iterations(self) -> int:
        return sum(len(r) for r in self.rounds)

    @property
    def throughput(self) -> float:
        """Samples per second over all timed runs (batch = axis 0 of the inputs)."""
        return self.batch * self.iterations / max(sum(self.round_seconds), 1e-12)

    @property
    def spread(self) -> float:
        """Interquartile range over the median: 0.05 means the middle half lies within 5 % of the median."""
        q1, q3 = self.percentile(25), self.percentile(75)
        return (q3 - q1) / self.median_ms if self.median_ms > 0 else 0.0

    @property
    def round_medians_ms(self) -> tuple[float, ...]:
        """Per round, the median latency (what users read)."""
        return tuple(float(np.median(r)) for r in self.rounds)

    @property
    def round_floor_ms(self) -> tuple[float, ...]:
        """Per round, the 25th-percentile latency: what the drift check compares.

        On a shared CI machine other processes stretch some runs by several
        times; the fast quarter of a round moves with a real slowdown of the
        engine but hardly with contention.
        """
        return tuple(float(np.percentile(r, 25)) for r in self.rounds)

    @property
    def round_throughputs(self) -> tuple[float, ...]:
        """Per round, samples/s over the faster half of its runs (contention-trimmed, like ``round_floor_ms``)."""
        out = []
        for r in self.rounds:
            fast = np.sort(np.asarray(r))[: max(1, (len(r) + 1) // 2)]
            out.append(self.batch * fast.size / max(float(fast.sum()) / 1e3, 1e-12))
        return tuple(out)

    @property
    def round_cpu_floor_ms(self) -> tuple[float, ...]:
        """Per round, the 25th percentile of CPU time per run (empty on a GPU clock).

        Other processes on a shared machine stretch wall time by the share of
        the cores they take; the CPU time a run needs hardly moves, while a
        slower engine needs more of it.
        """
        return tuple(float(np.percentile(r, 25)) for r in self.cpu_rounds)

    def summary(self) -> str:
        return (f"latency median {self.median_ms:.4g} ms, p90 {self.p90_ms:.4g} ms, p99 {self.p99_ms:.4g} ms "
                f"(spread {self.spread:.1%}), throughput {self.throughput:.4g} samples/s, batch {self.batch}, "
                f"{self.iterations} runs in {len(self.rounds)} round(s), clock {self.clock}")

    def to_json(self) -> dict[str, Any]:
        return {"clock": self.clock, "batch": self.batch, "rounds": [list(r) for r in self.rounds],
                "round_seconds": list(self.round_seconds), "device": dict(self.device),
                "median_ms": self.median_ms, "p90_ms": self.p90_ms, "p99_ms": self.p99_ms,
                "throughput": self.throughput, "spread": self.spread,
                "cpu_rounds": [list(r) for r in self.cpu_rounds]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        return cls(clock=str(data["clock"]), batch=int(data["batch"]),
                   rounds=tuple(tuple(float(x) for x in r) for r in data["rounds"]),
                   round_seconds=tuple(float(x) for x in data["round_seconds"]), device=dict(data.get("device", {})),
                   cpu_rounds=tuple(tuple(float(x) for x in r) for r in data.get("cpu_rounds", ())))


def _batch_of(inputs: Mapping[str, Any]) -> int:
    sizes = {int(np.shape(a)[0]) for a in inputs.values() if np.ndim(a) > 0}
    return sizes.pop() if len(sizes) == 1 else 1


def benchmark(
    run: Callable[[Mapping[str, Any]], Any],
    runner: Any,
    inputs: Mapping[str, Any],
    *,
    warmup: int = 10,
    iterations: int = 50,
    min_time: float = 0.0,
    rounds: int = 1,
    device: Mapping[str, Any] | None = None,
    clock: Clock | None = None,
) -> BenchmarkResult:
    """Time ``run(inputs)``; see :meth:`pytest_trt.engines.engine.Engine.benchmark`.

    With the monotonic clock the process's CPU time per run is recorded too
    (``time.process_time_ns``, every thread of the process), which the drift
    check compares on a busy machine.  ``clock``: where those times are read (default the real clocks); a
    runner's own timer (CUDA events) is used when it has one.
    """
    clock = SYSTEM_CLOCK if clock is None else clock
    if warmup < 0 or iterations < 1 or rounds < 1 or min_time < 0:
        raise ValueError(f"benchmark: need warmup >= 0, iterations >= 1, rounds >= 1, min_time >= 0; got "
                         f"warmup={warmup}, iterations={iterations}, rounds={rounds}, min_time={min_time}")
    make_timer = getattr(runner, "timer", None)
    timer: Timer = make_timer() if callable(make_timer) else MonotonicTimer(clock)
    for _ in range(warmup):
        run(inputs)
    on_cpu = isinstance(timer, MonotonicTimer)
    per_round: list[tuple[float, ...]] = []
    cpu_rounds: list[tuple[float, ...]] = []
    seconds: list[float] = []
    for _ in range(rounds):
        samples: list[float] = []
        cpu: list[float] = []
        t0 = clock.wall_ns()
        while len(samples) < iterations or (clock.wall_ns() - t0) / 1e9 < min_time / rounds:
            c0 = clock.cpu_ns()
            timer.start()
            run(inputs)
            samples.append(timer.stop())
            cpu.append((clock.cpu_ns() - c0) / 1e6)
        seconds.append((clock.wall_ns() - t0) / 1e9)
        per_round.append(tuple(samples))
        if on_cpu:
            cpu_rounds.append(tuple(cpu))
    return BenchmarkResult(clock=timer.name, batch=_batch_of(inputs), rounds=tuple(per_round),
                           round_seconds=tuple(seconds), device=dict(device or {}), cpu_rounds=tuple(cpu_rounds))

