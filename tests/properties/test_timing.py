"""Engine.benchmark, the drift comparison and the golden timing snapshot, on a deterministic clock.

No test here asserts on real time: the engines run for real (ONNX Runtime), but every time the benchmark reads comes
from a :class:`ScriptedClock` that each run advances by a scripted cost, so every statistic and every drift verdict
is known in advance from fixed numbers.  The rates on real time (false positives of the same engine, detection of a
slower one) are measured in ``benchmarks/bench_drift.py`` and ``benchmarks/bench_drift_rule.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_trt.compare.latency import bootstrap_ratio, timing_drift
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet
from pytest_trt.engines.benchmark import BenchmarkResult, benchmark
from pytest_trt.engines.engine import Engine
from pytest_trt.errors import GoldenMissing, GoldenTainted
from pytest_trt.golden import timing
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings
from tests.properties.conftest import rng_images


class ScriptedClock:
    """Wall and CPU time that move only when a run says how long it took."""

    def __init__(self) -> None:
        self.wall = self.cpu = 10**12

    def wall_ns(self) -> int:
        return self.wall

    def cpu_ns(self) -> int:
        return self.cpu

    def advance(self, wall_ms: float, cpu_ms: float) -> None:
        self.wall += round(wall_ms * 1e6)
        self.cpu += round(cpu_ms * 1e6)


Cost = float | tuple[float, float]  # ms of wall and CPU time (one number: both)


def _pair(cost: Cost) -> tuple[float, float]:
    return (cost, cost) if isinstance(cost, float | int) else cost


class ScriptedEngine(Engine):
    """A real engine whose measurements take scripted time: ``measurements[i]`` is the per-round run cost of the
    i-th ``benchmark`` call (every run of a round costs the same)."""

    def __init__(self, base: Engine, measurements: Sequence[Sequence[Cost]]) -> None:
        super().__init__(base.config, base.result, base.backend)
        self.clock = ScriptedClock()
        self.measurements = list(measurements)
        self.measured = 0
        self._costs: Iterator[tuple[float, float]] = iter(())

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = super().run(feeds)
        self.clock.advance(*next(self._costs, (1.0, 1.0)))  # a run outside a measurement: 1 ms
        return out

    def benchmark(self, inputs: Mapping[str, Any], *, warmup: int = 10, iterations: int = 50,
                  min_time: float = 0.0, rounds: int = 1, clock: Any = None) -> BenchmarkResult:
        per_round = self.measurements[self.measured]
        self.measured += 1
        assert len(per_round) == rounds and min_time == 0.0
        self._costs = iter([(1.0, 1.0)] * warmup + [_pair(c) for c in per_round for _ in range(iterations)])
        return super().benchmark(inputs, warmup=warmup, iterations=iterations, rounds=rounds, clock=self.clock)


def test_benchmark_statistics_are_the_scripted_times(mnv2_engine: Engine) -> None:
    clock = ScriptedClock()
    costs = iter([2.0, 4.0, 3.0, 5.0, 1.0, 6.0, 2.5, 3.5])  # ms, wall and CPU alike

    def run(feeds: Mapping[str, Any]) -> None:
        mnv2_engine.run(feeds)
        clock.advance(*_pair(next(costs)))

    r = benchmark(run, mnv2_engine.runner, rng_images(4), warmup=2, iterations=3, rounds=2, clock=clock)
    assert r.clock == "monotonic" and r.batch == 4 and r.iterations == 6
    assert r.rounds == ((3.0, 5.0, 1.0), (6.0, 2.5, 3.5)) and r.cpu_rounds == r.rounds  # the 2 warmups untimed
    assert r.round_seconds == pytest.approx((0.009, 0.012))
    assert r.throughput == pytest.approx(4 * 6 / 0.021)
    assert (r.median_ms, r.p90_ms) == pytest.approx((3.25, 5.5))  # numpy.percentile of the six, by hand
    assert r.round_floor_ms == pytest.approx((2.0, 3.0))  # 25th percentile of each round
    # the faster half of each round: (1, 3) ms and (2.5, 3.5) ms for 4 samples a run
    assert r.round_throughputs == pytest.approx((4 * 2 / 0.004, 4 * 2 / 0.006))
    assert BenchmarkResult.from_json(json.loads(json.dumps(r.to_json()))) == r


def test_cpu_time_is_recorded_apart_from_wall_time(mnv2_engine: Engine) -> None:
    clock = ScriptedClock()

    def busy_run(feeds: Mapping[str, Any]) -> None:  # another process takes the core: wall 2.5x the CPU time
        mnv2_engine.run(feeds)
        clock.advance(5.0, 2.0)

    r = benchmark(busy_run, mnv2_engine.runner, rng_images(2), warmup=1, iterations=5, rounds=2, clock=clock)
    assert r.rounds == ((5.0,) * 5,) * 2 and r.cpu_rounds == ((2.0,) * 5,) * 2
    assert r.round_cpu_floor_ms == (2.0, 2.0)


def test_min_time_extends_the_measurement(mnv2_engine: Engine) -> None:
    clock = ScriptedClock()

    def run(feeds: Mapping[str, Any]) -> None:
        mnv2_engine.run(feeds)
        clock.advance(30.0, 30.0)

    one = benchmark(run, mnv2_engine.runner, rng_images(1), warmup=0, iterations=1, min_time=0.2, clock=clock)
    assert one.iterations == 7 and sum(one.round_seconds) == pytest.approx(0.21)  # 6 runs are 180 ms < 200 ms
    two = benchmark(run, mnv2_engine.runner, rng_images(1), warmup=0, iterations=1, min_time=0.2, rounds=2,
                    clock=clock)
    assert [len(r) for r in two.rounds] == [4, 4]  # 100 ms a round: 4 runs of 30 ms


def _fake(rounds: list[float], batch: int = 4) -> BenchmarkResult:
    return BenchmarkResult(clock="monotonic", batch=batch, rounds=tuple((v, v, v) for v in rounds),
                           round_seconds=tuple(3 * v / 1e3 for v in rounds))


def test_drift_uses_the_confidence_interval():
    golden = _fake([10.0, 10.4, 9.8, 10.1, 10.9, 9.9, 10.2])
    same = _fake([10.3, 9.9, 10.0, 10.6, 10.1, 11.0, 9.7])
    half_speed = _fake([2 * v for v in [10.0, 10.4, 9.8, 10.1, 10.9, 9.9, 10.2]])
    assert not any(v.failed for v in timing_drift(golden, same))
    lat, thr = timing_drift(golden, half_speed, latency_drift=0.10, throughput_drift=0.15)
    assert lat.failed and thr.failed and lat.ratio == pytest.approx(2.0) and thr.ratio == pytest.approx(0.5)
    assert lat.line() == "[REGRESSION] latency: 10.1 -> 20.2 ms (ratio 2.000 = +100.0%, 95% CI 1.922..2.080; allowed +10%)"
    # 12 % slower but noisy: the interval reaches below +10 %, so no verdict of regression
    noisy = _fake([9.0, 13.0, 11.2, 12.9, 10.0, 11.5, 12.0])
    ratio, low, high = bootstrap_ratio(golden.round_medians_ms, noisy.round_medians_ms)
    assert ratio > 1.1 and low < 1.1
    assert not timing_drift(golden, noisy, throughput_drift=None)[0].failed


def test_cpu_time_divides_out_a_busy_machine():
    base = [10.0, 10.4, 9.8, 10.1, 10.9, 9.9, 10.2]

    def timed(wall_ms, cpu_ms):
        r = _fake(wall_ms)
        return BenchmarkResult(clock=r.clock, batch=r.batch, rounds=r.rounds, round_seconds=r.round_seconds,
                               cpu_rounds=tuple((c, c, c) for c in cpu_ms))

    golden = timed(base, base)
    busy = timed([2.5 * v for v in base], base)  # wall 2.5x longer, same CPU time: the machine, not the engine
    slower = timed([2.0 * v for v in base], [2.0 * v for v in base])  # the engine needs twice the CPU
    assert not any(v.failed for v in timing_drift(golden, busy))
    assert timing_drift(golden, busy)[0].cpu_time and timing_drift(golden, busy)[0].ratio == pytest.approx(1.0)
    assert all(v.failed for v in timing_drift(golden, slower))
    assert ", CPU time, " in timing_drift(golden, slower)[0].line()
    # a GPU measurement (no CPU times) compares wall/event times: the busy wall clock reads as a regression
    assert timing_drift(_fake(base), _fake([2.5 * v for v in base]))[0].failed


def _check(tmp_path: Path, update: bool, policy: Any = None, notes: list[str] | None = None) -> GoldenCheck:
    """The ``trt_golden`` object of a test in ``tmp_path`` (imports at module level: pytester's in-process runs
    restore ``sys.modules``, and a golden module imported inside one would come back as a second copy)."""
    return GoldenCheck(GoldenSettings(golden_dir=tmp_path, update=update, approve="CR-7" if update else None,
                                      thresholds=ThresholdSet(Thresholds()), rootdir=tmp_path,
                                      provenance=policy or ProvenancePolicy()), nodeid="t::x",
                       on_note=(notes if notes is not None else []).append)


def test_golden_timing_snapshot_lifecycle(tmp_path: Path, mnv2_engine: Engine) -> None:
    notes: list[str] = []
    ten = [10.0] * 3
    engine = ScriptedEngine(mnv2_engine, [ten, ten, ten])  # the snapshot, the same engine, another device class
    ds = GoldenDataset.from_arrays(rng_images(16))
    fast = {"timing_rounds": 3, "timing_iterations": 4}
    _check(tmp_path, True).check(engine, dataset=ds, structure="ignore")  # outputs only: no timing file
    path = tmp_path / "mnv2_ort.timing.json"
    assert not path.exists()
    with pytest.raises(GoldenMissing, match=r"no timing snapshot for 'mnv2_ort': .*mnv2_ort.timing.json does not"):
        _check(tmp_path, False).check(engine, structure="ignore", latency_drift=0.1, **fast)
    _check(tmp_path, True).check(engine, dataset=ds, structure="ignore", latency_drift=0.1, throughput_drift=0.15,
                                 **fast)
    doc = json.loads(path.read_text())
    assert doc["approval"] == "CR-7" and doc["benchmark"]["batch"] == 4  # the profile's opt batch
    assert doc["benchmark"]["rounds"] == [[10.0] * 4] * 3 and doc["device_class"].startswith("cpu ")
    _check(tmp_path, False).check(engine, structure="ignore", latency_drift=0.1, throughput_drift=0.15, **fast)
    assert engine.measured == 2  # no breach: measured once
    doc["device_class"] = "gpu NVIDIA H200 sm 9.0"
    path.write_text(json.dumps(doc))
    # another device class is a provenance difference: compared and noted under "compare" (the default) ...
    _check(tmp_path, False, notes=notes).check(engine, structure="ignore", latency_drift=0.1, **fast)
    assert [n for n in notes if n.startswith("timing snapshot of 'mnv2_ort': provenance differs (device class")], notes
    # ... and tainted under "fail" or with the device field in fail_on, before anything is measured
    for strict in (ProvenancePolicy("fail"), ProvenancePolicy("compare", ("device",))):
        with pytest.raises(GoldenTainted, match=r"device class \(timing snapshot 'gpu NVIDIA H200 sm 9.0', now 'cpu "):
            _check(tmp_path, False, strict).check(engine, structure="ignore", latency_drift=0.1, **fast)
    assert engine.measured == 3
    doc["device_class"] = timing.device_class(mnv2_engine.result.device)
    path.write_text(json.dumps(doc))
    slow = ScriptedEngine(mnv2_engine, [[20.0] * 5, [20.0] * 5])  # twice the time, twice
    opts = timing.TimingOptions(0.10, 0.15, rounds=5, iterations=8)
    with pytest.raises(AssertionError, match=r"(?s)speed regressed .* \(measured twice\):\n  \[REGRESSION\] latency"):
        timing.verify(_check(tmp_path, False).scope, slow, opts)
    assert slow.measured == 2


# -- the decision rule, through the golden path: a snapshot at 10 ms a run (batch 4: 400 samples/s) ---------------
# docs/testing.md: throughput fails only when the whole 95 % interval of current/golden is below 1 - 15 %, latency
# only when it is entirely above 1 + 10 %; a breach is measured once more and fails only if it repeats.

ROUNDS = 7


def _verify(tmp_path: Path, mnv2_engine: Engine, *measurements: Sequence[Cost], latency: float | None = None,
            throughput: float | None = 0.15) -> tuple[ScriptedEngine, Any]:
    """Record a 10 ms snapshot, then verify an engine measured as scripted; (engine, verdicts or the failure)."""
    golden = ScriptedEngine(mnv2_engine, [[10.0] * ROUNDS])
    _check(tmp_path, True).check(golden, dataset=GoldenDataset.from_arrays(rng_images(8)), structure="ignore",
                                 latency_drift=0.10, throughput_drift=0.15, timing_rounds=ROUNDS,
                                 timing_iterations=3)
    engine = ScriptedEngine(mnv2_engine, measurements)
    opts = timing.TimingOptions(latency, throughput, rounds=ROUNDS, iterations=3)
    try:
        return engine, timing.verify(_check(tmp_path, False).scope, engine, opts)
    except AssertionError as exc:
        return engine, exc


def test_throughput_whole_interval_below_the_limit_fails_when_it_repeats(tmp_path: Path, mnv2_engine: Engine) -> None:
    engine, failure = _verify(tmp_path, mnv2_engine, [12.5] * ROUNDS, [12.5] * ROUNDS)
    assert isinstance(failure, AssertionError) and engine.measured == 2
    # 4 samples / 12.5 ms = 320 samples/s against 400: ratio 0.8, the interval 0.8..0.8
    assert ("[REGRESSION] throughput: 400 -> 320 samples/s (ratio 0.800 = -20.0%, CPU time, 95% CI 0.800..0.800; "
            "allowed -15%)") in str(failure)


def test_a_breach_that_does_not_repeat_passes(tmp_path: Path, mnv2_engine: Engine) -> None:
    engine, verdicts = _verify(tmp_path, mnv2_engine, [12.5] * ROUNDS, [10.0] * ROUNDS)
    assert engine.measured == 2 and [v.failed for v in verdicts] == [False]
    assert verdicts[0].ratio == pytest.approx(1.0)


def test_throughput_interval_reaching_above_the_limit_passes(tmp_path: Path, mnv2_engine: Engine) -> None:
    """The point estimate (the median round, 12.5 ms: ratio 0.8) breaches; the interval reaches 1.0: no verdict."""
    engine, verdicts = _verify(tmp_path, mnv2_engine, [12.5, 10.0, 12.5, 10.0, 12.5, 10.0, 12.5])
    (v,) = verdicts
    assert engine.measured == 1 and not v.failed
    assert v.ratio == pytest.approx(0.8) and v.low == pytest.approx(0.8) and v.high == pytest.approx(1.0)


def test_throughput_within_the_limit_passes(tmp_path: Path, mnv2_engine: Engine) -> None:
    engine, verdicts = _verify(tmp_path, mnv2_engine, [11.5] * ROUNDS)  # ratio 10/11.5 = 0.870 > 0.85
    assert engine.measured == 1 and not verdicts[0].failed and verdicts[0].ratio == pytest.approx(10 / 11.5)


def test_latency_whole_interval_above_the_limit_fails(tmp_path: Path, mnv2_engine: Engine) -> None:
    engine, failure = _verify(tmp_path, mnv2_engine, [11.5] * ROUNDS, [11.5] * ROUNDS, latency=0.10, throughput=None)
    assert isinstance(failure, AssertionError) and engine.measured == 2
    assert "[REGRESSION] latency: 10 -> 11.5 ms (ratio 1.150 = +15.0%, CPU time, 95% CI 1.150..1.150" in str(failure)
    engine, verdicts = _verify(tmp_path, mnv2_engine, [11.5, 10.0, 11.5, 10.0, 11.5, 10.0, 11.5], latency=0.10,
                               throughput=None)
    assert not verdicts[0].failed and verdicts[0].low == pytest.approx(1.0)  # the interval reaches 1.0


def test_a_busy_machine_stretches_wall_time_only(tmp_path: Path, mnv2_engine: Engine) -> None:
    """Wall time 2.5x (another process on the core), the CPU time a run needs unchanged: no regression."""
    engine, verdicts = _verify(tmp_path, mnv2_engine, [(25.0, 10.0)] * ROUNDS, latency=0.10)
    assert engine.measured == 1 and not any(v.failed for v in verdicts)
    assert all(v.cpu_time and v.ratio == pytest.approx(1.0) for v in verdicts)
