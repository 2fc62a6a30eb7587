"""``OutputMonitor.observe`` against the inference it watches, run by hand: ``python benchmarks/bench_monitor.py``.

One run, side by side: ONNX Runtime (CPU, default threads) runs the 224x224 MobileNetV2 of
``benchmarks/models.py`` on a batch of 256 images, then ``observe`` takes that batch's (256, 1000) float32
logits.  The spec comes from the model's logits on another 256 images.  Prints each median and their ratio.

Targets: ``observe`` under 2 ms, under 5 % of the inference.  Exits 1 when one is missed.
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

from benchmarks.models import write  # noqa: E402
from pytest_trt.monitor import MonitorSpec, OutputMonitor  # noqa: E402
from pytest_trt.monitor.spec import output_reference  # noqa: E402

TARGET_MS = 2.0
TARGET_RATIO = 0.05


def median_ms(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    import onnxruntime as ort

    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--runs", type=int, default=5, help="inference runs timed")
    ap.add_argument("--observes", type=int, default=300, help="observe calls timed")
    args = ap.parse_args()
    model = write(Path(tempfile.mkdtemp(prefix="bench-monitor-")) / "mnv2_224.onnx")
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    golden_images = rng.random((args.batch, 3, 224, 224), dtype=np.float32)
    images = rng.random((args.batch, 3, 224, 224), dtype=np.float32)
    golden = session.run(["logits"], {"input": golden_images})[0]
    monitor = OutputMonitor(MonitorSpec("mnv2_224", {"logits": output_reference("logits", golden)}))
    logits = session.run(["logits"], {"input": images})[0]
    assert logits.shape == (args.batch, 1000) and logits.dtype == np.float32
    for _ in range(20):  # warm the work buffers
        monitor.observe({"logits": logits})
    infer = median_ms(lambda: session.run(["logits"], {"input": images}), args.runs)
    observe = median_ms(lambda: monitor.observe({"logits": logits}), args.observes)
    ratio = observe / infer
    print(f"ONNX Runtime MobileNetV2 224x224, batch {args.batch}: {infer:.1f} ms (median of {args.runs})")
    print(f"observe on ({args.batch}, 1000) float32 logits: {observe:.3f} ms (median of {args.observes}); "
          f"target < {TARGET_MS} ms")
    print(f"observe / inference: {ratio * 100:.3f} %; target < {TARGET_RATIO * 100:.0f} %")
    return 0 if observe < TARGET_MS and ratio < TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
