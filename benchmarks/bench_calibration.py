"""INT8 calibration of the example MobileNetV2 with 64 samples: time per method, and the second session (run by hand).

    python benchmarks/bench_calibration.py [--backend tensorrt-rtx|onnxruntime] [--samples 64] [--batch 8]

For each explicit method the product path runs twice, as two pytest sessions would: a fresh
:class:`~pytest_trt.engines.provider.EngineProvider` on an empty engine cache (calibrate, make the Q/DQ model, build,
write the cache entry), then a new provider on the same cache folder (cache hit: no calibration, no build).
Printed side by side: calibration seconds (ranges + Q/DQ), build seconds, whole first session, second
session, and their ratio.  Target: the second session pays nothing for calibration (0 s, a cache hit).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.models import write_all  # noqa: E402
from pytest_trt import BuildConfig, Calibration, Profile  # noqa: E402
from pytest_trt.config import EXPLICIT_METHODS  # noqa: E402
from pytest_trt.engines.provider import EngineProvider  # noqa: E402

SHAPES = ((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))


def session(backend: str, cache: Path, config: BuildConfig) -> tuple[float, dict[str, float], str]:
    """One provider's get(): wall seconds, the result's durations, the event status."""
    t0 = time.perf_counter()
    provider = EngineProvider(backend, cache_dir=cache, build=True)
    engine = provider.get(config)
    provider.flush()
    return time.perf_counter() - t0, dict(engine.result.durations), provider.events[-1].status


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="tensorrt-rtx", choices=("tensorrt-rtx", "onnxruntime"))
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-calib-") as tmp:
        root = Path(tmp)
        model = write_all(root / "models")["mobilenet_v2"]
        rng = np.random.default_rng(0)
        data = rng.standard_normal((args.samples, 3, 32, 32)).astype(np.float32)
        data[: max(1, args.samples // 25)] *= 20.0  # a few outliers, as in the incident
        np.save(root / "calib.npy", data)
        print(f"MobileNetV2 example, {args.samples} samples in batches of {args.batch}, backend {args.backend}")
        print(f"{'method':13s} {'calibrate s':>11s} {'build s':>8s} {'session 1 s':>11s} {'session 2 s':>11s} "
              f"{'status 2':>8s} {'s1/s2':>7s}")
        for method in EXPLICIT_METHODS:
            config = BuildConfig(name=f"mnv2_int8_{method}", onnx=model, precision="int8",
                                 profiles=[Profile(input=SHAPES)],
                                 calibration=Calibration(algorithm=method, data=str(root / "calib.npy"),
                                                         batch_size=args.batch))
            cache = root / f"cache-{method}"
            first, durations, _ = session(args.backend, cache, config)
            second, again, status = session(args.backend, cache, config)
            print(f"{method:13s} {durations.get('calibration', 0.0):11.2f} {durations.get('build', 0.0):8.2f} "
                  f"{first:11.2f} {second:11.3f} {status:>8s} {first / second:7.0f}x")


if __name__ == "__main__":
    main()
