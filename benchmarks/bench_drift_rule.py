"""False-positive rate of the timing drift rule on real measurements: ``python benchmarks/bench_drift_rule.py``.

The same engine (a MobileNetV2-style model, ONNX Runtime, one thread, batch 4) is measured ``--measurements``
times as a timing check measures it (7 rounds of 20 runs, 5 warmup runs), and so is the same network computed
twice (2x the work, same outputs).  The decision rule of ``trt_golden.check(..., latency_drift=0.10,
throughput_drift=0.15)`` (:func:`pytest_trt.compare.latency.timing_drift`) is then applied

- to every ordered pair (snapshot i, check j), i != j, of the same engine: a failure is a false positive of one
  measurement;
- to every triple (snapshot i, check j, re-check k), all different: the check fails only when both j and k breach,
  as ``golden/timing.py`` does (a breach is measured once more and fails only if it repeats);
- to every (snapshot of the engine, check of the 2x network) pair and triple: the detection rate.

Pairs share measurements, so the rates are estimates over ``n (n - 1)`` and ``n (n - 1) (n - 2)`` comparisons of
``n`` independent measurements, not independent trials.  Exits 1 when a false positive repeats or a 2x slowdown is
missed.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.models import mobilenet_v2, mobilenet_v2_twice, save  # noqa: E402
from pytest_trt.backends.onnxruntime import OrtBackend  # noqa: E402
from pytest_trt.compare.latency import timing_drift  # noqa: E402
from pytest_trt.config import BuildConfig, OrtOptions, Profile  # noqa: E402
from pytest_trt.engines.benchmark import BenchmarkResult  # noqa: E402
from pytest_trt.engines.engine import Engine  # noqa: E402

LIMITS = {"latency_drift": 0.10, "throughput_drift": 0.15}


def _fails(golden: BenchmarkResult, current: BenchmarkResult) -> bool:
    return any(v.failed for v in timing_drift(golden, current, **LIMITS))


def rates(snapshots: list[BenchmarkResult], checks: list[BenchmarkResult], *, same: bool) -> tuple[int, int, int, int]:
    """(single failures, pairs, repeated failures, triples) of ``checks`` against ``snapshots``."""
    n = len(snapshots)
    fail = {(i, j): _fails(snapshots[i], checks[j]) for i in range(n) for j in range(len(checks))
            if not (same and i == j)}
    singles = sum(fail.values())
    triples = [(i, j, k) for i, j, k in itertools.product(range(n), range(len(checks)), range(len(checks)))
               if j != k and (i, j) in fail and (i, k) in fail]
    repeated = sum(1 for i, j, k in triples if fail[(i, j)] and fail[(i, k)])
    return singles, len(fail), repeated, len(triples)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measurements", type=int, default=12)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-drift-rule-"))
    size = args.size
    profile = Profile(input=((1, 3, size, size), (4, 3, size, size), (8, 3, size, size)))
    ort = OrtOptions(graph_optimization_level="extended", intra_op_threads=1)
    backend = OrtBackend()

    def engine(onnx: Path) -> Engine:
        config = BuildConfig(name="mnv2_drift_rule", onnx=onnx, profiles=[profile], ort=ort)
        return Engine(config, backend.build_config(config), backend)

    fast = engine(save(mobilenet_v2(size=size), tmp / "mnv2.onnx"))
    slow = engine(save(mobilenet_v2_twice(size=size), tmp / "mnv2_twice.onnx"))
    feeds = {"input": np.random.default_rng(0).random((4, 3, size, size), dtype=np.float32)}
    t0 = time.perf_counter()
    same, twice = [], []
    for i in range(args.measurements):  # interleaved, so load on the machine hits both alike
        same.append(fast.benchmark(feeds, warmup=5, iterations=20, rounds=7))
        twice.append(slow.benchmark(feeds, warmup=5, iterations=20, rounds=7))
        print(f"  measurement {i + 1:2d}: CPU floor {np.median(same[-1].round_cpu_floor_ms):.3f} ms, "
              f"2x network {np.median(twice[-1].round_cpu_floor_ms):.3f} ms", flush=True)
    fp1, pairs, fp2, triples = rates(same, same, same=True)
    det1, dpairs, det2, dtriples = rates(same, twice, same=False)
    print(f"false positives, one measurement: {fp1}/{pairs} ({fp1 / pairs:.1%})")
    print(f"false positives, breach measured again (the rule): {fp2}/{triples} ({fp2 / triples:.2%})")
    print(f"2x slower detected, one measurement: {det1}/{dpairs}; with the repeat: {det2}/{dtriples}")
    print(f"{args.measurements} measurements of each engine ({2 * args.measurements * 145} runs) in "
          f"{time.perf_counter() - t0:.0f} s")
    return 0 if fp2 == 0 and det2 == dtriples else 1


if __name__ == "__main__":
    sys.exit(main())
