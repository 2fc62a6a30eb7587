"""ONNX Runtime backend benchmarks, run by hand: ``python benchmarks/bench_ort.py``.

1. ``Engine.run`` overhead (backends.feeding's checks) vs a raw ``session.run`` on the
   same session: example MobileNetV2, batch 8, same process, alternating
   runs; target: ratio of medians <= 1.05.
2. Cache hit (read the artifact folder, load the optimized model with
   optimizations off) vs cache miss (build: optimize with the VERBOSE log
   captured, save the optimized model).

Exits 1 when the run-overhead target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.models import mobilenet_v2, save  # noqa: E402
from pytest_trt.artifact import BuildResult  # noqa: E402
from pytest_trt.backends.onnxruntime import OrtBackend, OrtRunner  # noqa: E402
from pytest_trt.config import BuildConfig, OrtOptions, Profile  # noqa: E402
from pytest_trt.engines.engine import Engine  # noqa: E402

TARGET_RATIO = 1.05


def _ms(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:8.3f} ms  (min {min(samples) * 1e3:.3f}, n={len(samples)})"


def bench_run(engine: Engine, batch: int, rounds: int, trials: int) -> float:
    """Median over ``trials`` of the ratio of medians (a shared CI box makes single trials noisy)."""
    x = np.random.default_rng(0).standard_normal((batch, 3, 32, 32)).astype(np.float32)
    runner = engine.runner
    assert isinstance(runner, OrtRunner)
    session = runner.session  # the very session Engine.run uses
    feeds = {"input": x}
    for _ in range(20):  # warm both paths (arena, plan cache)
        session.run(None, feeds)
        engine.run(feeds)
    ratios: list[float] = []
    for trial in range(trials):
        raw: list[float] = []
        checked: list[float] = []
        for i in range(rounds):
            # alternate which goes first so drift and cache effects hit both equally
            for which in ("raw", "eng") if i % 2 == 0 else ("eng", "raw"):
                t = time.perf_counter()
                if which == "raw":
                    session.run(None, feeds)
                    raw.append(time.perf_counter() - t)
                else:
                    engine.run(feeds)
                    checked.append(time.perf_counter() - t)
        ratios.append(statistics.median(checked) / statistics.median(raw))
        print(f"trial {trial}: raw session.run {_ms(raw)}")
        print(f"         Engine.run     {_ms(checked)}   ratio of medians {ratios[-1]:.4f}, "
              f"of minimums {min(checked) / min(raw):.4f}")
    ratio = statistics.median(ratios)
    print(f"median ratio of medians over {trials} trials: {ratio:.4f}  (target <= {TARGET_RATIO})")
    return ratio


def bench_cache(backend: OrtBackend, config: BuildConfig, rounds: int, folder: Path) -> None:
    miss: list[float] = []
    hit: list[float] = []
    x = {"input": np.zeros((1, 3, 32, 32), np.float32)}
    for i in range(rounds):
        entry = folder / f"entry{i}"
        t = time.perf_counter()
        result = backend.build_config(config)
        runner = backend.runner(result, config)  # a test needs a runner in both cases
        miss.append(time.perf_counter() - t)
        result.write(entry)
        runner.run(x)
        t = time.perf_counter()
        loaded = BuildResult.read(entry)
        OrtBackend().runner(loaded, config)
        hit.append(time.perf_counter() - t)
    print(f"cache miss (build + runner)         : {_ms(miss)}")
    print(f"cache hit  (read artifact + runner) : {_ms(hit)}")
    print(f"hit / miss                          : {statistics.median(hit) / statistics.median(miss):.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--cache-rounds", type=int, default=30)
    ap.add_argument("--level", default="all", choices=OrtOptions.LEVELS)
    args = ap.parse_args()
    backend = OrtBackend()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = save(mobilenet_v2(), Path(tmp) / "mobilenet_v2.onnx")
        config = BuildConfig(
            name="mobilenet_v2", onnx=onnx_path,
            profiles=(Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))),),
            ort=OrtOptions(graph_optimization_level=args.level),
        )
        engine = Engine(config, backend.build_config(config), backend)
        print(f"onnxruntime {backend.version()}, level {args.level}, device {backend.device(config)}")
        print("-- Engine.run overhead, MobileNetV2 batch 8 --")
        ratio = bench_run(engine, 8, args.rounds, args.trials)
        print("-- ORT engine cache: hit vs miss --")
        bench_cache(backend, config, args.cache_rounds, Path(tmp))
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
