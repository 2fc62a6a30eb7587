"""Per-tensor INT8 error (``pytest-trt calib errors``) of the 224x224 MobileNetV2 on 64 samples (run by hand).

    python benchmarks/bench_sensitivity.py [--samples 64] [--batch 8] [--algorithm minmax]

The model of ``benchmarks/models.py`` is calibrated (min-max on 32 samples: not timed, the explicit path's own
cost is ``bench_calibration.py``'s), then :func:`pytest_trt.sensitivity.tensor_errors.measure` streams the
samples through the float and the Q/DQ model with every quantized activation exposed, in a child process of its
own.  Printed: seconds, tensors, and the child's peak RSS (its ru_maxrss: model, sessions, inputs and one batch's
exposed activations).  Targets: < 30 s; peak memory set by the batch, not by the sample count (compare
--samples 64 and --samples 128).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.models import write  # noqa: E402
from pytest_trt import BuildConfig, Calibration, Profile  # noqa: E402
from pytest_trt.calibration.explicit import calibrate_explicit  # noqa: E402
from pytest_trt.calibration.store import set_store_root  # noqa: E402
from pytest_trt.sensitivity.tensor_errors import batches_of, measure  # noqa: E402


def child(model: str, qdq: str, samples: int, batch: int) -> tuple[float, int, int, int, str, float, str]:
    """measure() in this (spawned) process: seconds, batches, activations, weights, the worst tensor and nodes."""
    x = np.random.default_rng(1).random((samples, 3, 224, 224), dtype=np.float32)
    t0 = time.perf_counter()
    errors = measure(Path(model), Path(qdq), batches_of({"input": x}, samples, batch))
    seconds = time.perf_counter() - t0
    acts = sum(1 for t in errors.tensors if t.kind == "activation")
    worst = errors.tensors[0]
    return (seconds, errors.batches, acts, len(errors.tensors) - acts, worst.tensor, worst.sqnr_db,
            ", ".join(n for n, _ in errors.ranked_nodes()[:3]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--algorithm", default="minmax")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-sens-") as tmp:
        folder = Path(tmp)
        set_store_root(folder / "store")
        model = write(folder / "mobilenet_v2_224.onnx")
        rng = np.random.default_rng(0)
        np.save(folder / "calib.npy", rng.random((32, 3, 224, 224), dtype=np.float32))
        config = BuildConfig(name="mnv2", onnx=model, precision="int8",
                             profiles=(Profile(input=((1, 3, 224, 224), (16, 3, 224, 224), (64, 3, 224, 224))),),
                             calibration=Calibration(algorithm=args.algorithm, data=str(folder / "calib.npy"),
                                                     batch_size=8))
        t0 = time.perf_counter()
        qdq = calibrate_explicit(config).qdq_model
        calib_s = time.perf_counter() - t0
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(1) as pool:
            seconds, batches, acts, weights, worst, db, nodes = pool.apply(
                child, (str(model), str(qdq), args.samples, args.batch))
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    inputs = args.samples * 3 * 224 * 224 * 4 / 2**20
    print(f"MobileNetV2 224x224, {args.algorithm}: calibration {calib_s:.1f} s (not part of the figure)")
    print(f"calib errors: {args.samples} samples in {batches} batches of {args.batch}: {seconds:.1f} s "
          f"(target < 30 s); {acts} activations, {weights} weights")
    print(f"peak RSS of the measuring process: {peak:.0f} MiB (inputs {inputs:.0f} MiB of it)")
    print(f"worst: {worst} own {db:.1f} dB; nodes first: {nodes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
