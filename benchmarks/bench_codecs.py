"""Which HDF5 filter each kind of golden data should use, by measurement: ``python benchmarks/bench_codecs.py``.

Data: the outputs of the torchvision-size MobileNetV2 of ``benchmarks/models.py``
run by ONNX Runtime (1000-class logits; the 1280x7x7 ReLU6 feature map before
the pool, a wide output), and image inputs (smooth synthetic images quantized
to uint8 and normalized with the ImageNet mean/std, as a loader gives them).
For each filter: write and read MB/s (median of alternating rounds through
h5py with the store's layout: contiguous unfiltered, chunks of whole samples
when filtered) and the compressed size.  zstd needs
``hdf5plugin`` (not a dependency of pytest-trt; measured to decide whether it
should be one).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.models import mobilenet_v2_224  # noqa: E402
from pytest_trt.golden.writers import chunks_for  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(1, 3, 1, 1)


def images(n: int, rng: np.random.Generator) -> np.ndarray:
    low = rng.uniform(0, 255, (n, 3, 14, 14)).astype(np.float32)
    big = low.repeat(16, axis=2).repeat(16, axis=3)  # 224x224 blocks ...
    big += rng.normal(0, 12, big.shape).astype(np.float32)  # ... with sensor-like noise
    u8 = np.clip(big, 0, 255).astype(np.uint8)
    return ((u8.astype(np.float32) / 255.0 - MEAN) / STD).astype(np.float32)


def model_outputs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    model = mobilenet_v2_224()
    model.graph.output.append(helper.make_tensor_value_info("head/relu6:out", TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    logits, feats = [], []
    for i in range(0, x.shape[0], 16):
        lo, fe = sess.run(None, {"input": x[i : i + 16]})
        logits.append(lo)
        feats.append(fe)
    return np.concatenate(logits), np.concatenate(feats)


def filters() -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {
        "none (contiguous)": {}, "gzip-1": {"compression": "gzip", "compression_opts": 1},
        "gzip-1+shuffle": {"compression": "gzip", "compression_opts": 1, "shuffle": True},
        "gzip-4+shuffle (old inputs)": {"compression": "gzip", "compression_opts": 4, "shuffle": True},
        "lzf (old outputs)": {"compression": "lzf"},
    }
    try:
        import hdf5plugin

        table["zstd-1"] = dict(hdf5plugin.Zstd(clevel=1))
        table["blosc-lz4+shuffle"] = dict(hdf5plugin.Blosc(cname="lz4", clevel=5, shuffle=hdf5plugin.Blosc.SHUFFLE))
    except ImportError:
        pass
    return table


def measure(folder: Path, data: np.ndarray, opts: dict[str, Any], batch: int) -> tuple[float, float, int]:
    path = folder / "c.h5"
    t0 = time.perf_counter()
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("d", shape=data.shape, dtype=data.dtype, track_times=False,
                              chunks=chunks_for(data.shape, 4) if opts else None, **opts)  # as writers.create_array
        for s in range(0, data.shape[0], batch):
            ds[s : s + batch] = data[s : s + batch]
    t1 = time.perf_counter()
    with h5py.File(path, "r") as f:
        ds = f["d"]
        for s in range(0, data.shape[0], batch):
            ds[s : s + batch]
    t2 = time.perf_counter()
    size = path.stat().st_size
    path.unlink()
    return data.nbytes / (t1 - t0) / 1e6, data.nbytes / (t2 - t1) / 1e6, size


def main() -> None:
    rng = np.random.default_rng(0)
    x = images(int(os.environ.get("BENCH_IMAGES", "128")), rng)
    logits, feats = model_outputs(x)
    reps = int(os.environ.get("BENCH_REPS", "3"))
    # 64 copies of the real logits, each row rescaled by 1 + 1e-2 * N(0,1) so no chunk repeats bytes
    scale = (1 + 1e-2 * rng.standard_normal((64 * logits.shape[0], 1))).astype(np.float32)
    kinds = {"logits (N,1000)": (np.tile(logits, (64, 1)) * scale, 4096), "feature map (N,1280,7,7)": (feats, 64),
             "image input (N,3,224,224)": (x, 64)}
    table = filters()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        for kind, (data, batch) in kinds.items():
            print(f"\n{kind}: {data.nbytes / 2**20:.0f} MiB, medians of {reps} alternating rounds")
            print(f"  {'filter':28s} {'write MB/s':>10s} {'read MB/s':>10s} {'size %':>7s}")
            results: dict[str, list[tuple[float, float, int]]] = {k: [] for k in table}
            for _ in range(reps):
                for name, opts in table.items():
                    results[name].append(measure(Path(tmp), data, opts, batch))
            for name, rs in results.items():
                w = statistics.median(r[0] for r in rs)
                r = statistics.median(r[1] for r in rs)
                print(f"  {name:28s} {w:10.0f} {r:10.0f} {100 * rs[0][2] / data.nbytes:7.1f}")


if __name__ == "__main__":
    main()
