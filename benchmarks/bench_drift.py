"""Latency/throughput drift check: false positives and detection, run by hand: ``python benchmarks/bench_drift.py``.

The golden timing snapshot of a MobileNetV2-style model at 224x224 (ONNX
Runtime, one thread) is recorded once through the real golden path
(``trt_golden.check(..., latency_drift=0.10, throughput_drift=0.15)`` in
update mode); then the check runs N times against the same engine (target: 0
failures) and N times against the same network computed twice, 2x the work
with the same outputs (target: N failures).  Every check measures 7 rounds of
20 runs and re-measures a breach once before failing, as in a test.

Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.models import mobilenet_v2, mobilenet_v2_twice, save  # noqa: E402
from pytest_trt.backends.onnxruntime import OrtBackend  # noqa: E402
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet  # noqa: E402
from pytest_trt.config import BuildConfig, OrtOptions, Profile  # noqa: E402
from pytest_trt.engines.engine import Engine  # noqa: E402
from pytest_trt.golden import timing  # noqa: E402
from pytest_trt.golden.dataset import GoldenDataset  # noqa: E402
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-drift-"))
    fast_onnx = save(mobilenet_v2(size=args.size), tmp / "mnv2.onnx")
    slow_onnx = save(mobilenet_v2_twice(size=args.size), tmp / "mnv2_twice.onnx")
    profile = Profile(input=((1, 3, args.size, args.size), (4, 3, args.size, args.size), (8, 3, args.size, args.size)))
    ort = OrtOptions(graph_optimization_level="extended")
    backend = OrtBackend()

    def engine(onnx: Path) -> Engine:
        config = BuildConfig(name="mnv2_drift", onnx=onnx, profiles=[profile], ort=ort)
        return Engine(config, backend.build_config(config), backend)

    fast, slow = engine(fast_onnx), engine(slow_onnx)

    def check(update: bool) -> GoldenCheck:
        return GoldenCheck(GoldenSettings(golden_dir=tmp / "golden", update=update, approve="bench" if update else None,
                                          thresholds=ThresholdSet(Thresholds()), rootdir=tmp), nodeid="bench")

    images = np.random.default_rng(0).random((16, 3, args.size, args.size), dtype=np.float32)
    limits = {"latency_drift": 0.10, "throughput_drift": 0.15}
    t0 = time.perf_counter()
    check(True).check(fast, dataset=GoldenDataset.from_arrays({"input": images}), structure="ignore", **limits)
    opts = timing.TimingOptions(0.10, 0.15)
    print(f"snapshot recorded in {time.perf_counter() - t0:.1f} s", flush=True)
    results = {}
    for name, eng in (("same engine", fast), ("2x slower", slow)):
        failures, lines = 0, []
        for i in range(args.runs):
            try:
                verdicts = timing.verify(check(False).scope, eng, opts)
                lines.append(" | ".join(v.line() for v in verdicts))
            except AssertionError as exc:
                failures += 1
                lines.append(" | ".join(ln.strip() for ln in str(exc).splitlines()[1:3]))
            print(f"  {name:12s} run {i + 1:2d}: {lines[-1]}", flush=True)
        results[name] = failures
        print(f"{name}: {failures}/{args.runs} failures", flush=True)
    ok = results["same engine"] == 0 and results["2x slower"] == args.runs
    print(f"false positives {results['same engine']}/{args.runs} (target 0), detections {results['2x slower']}/"
          f"{args.runs} (target {args.runs}): {'OK' if ok else 'MISSED'}; {time.perf_counter() - t0:.0f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
