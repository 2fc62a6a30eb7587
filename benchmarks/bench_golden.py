"""Golden store benchmarks, run by hand: ``python benchmarks/bench_golden.py [--gib 1] [--poly-mib 64]``.

1. Compare 1 GiB of float32 outputs with a golden snapshot on disk, streamed
   in batches (golden read chunk by chunk, elementwise metrics in float64):
   throughput in GB/s and the peak RSS of the comparing process (run in a
   fresh subprocess so the setup's memory does not count).  Targets: >= 1 GB/s,
   peak RSS < 512 MiB.
2. Side by side on the same outputs: save + reload-and-compare through this
   store vs Polygraphy's ``--save-outputs`` JSON (``RunResults.save`` /
   ``RunResults.load`` + ``Comparator.compare_accuracy``): time and file size.
   Needs ``pip install polygraphy`` (a benchmark-only dependency).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_trt.compare.metrics import ElementAccumulator
from pytest_trt.golden import atomic, store
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import Provenance
from pytest_trt.golden.streaming import prefetched

ROW = 4096  # float32 values per sample: 16 KiB
BATCH = 256  # samples per engine batch: 4 MiB
POOL_ROWS = 2048  # obtained outputs cycle through a 32 MiB pool (no RNG cost in the timed loop)
PROV = Provenance("bench", "0", "cpu", "c", "o", "d", "0", "2025-01-01T00:00:00Z")


def pool() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    base = rng.standard_normal((POOL_ROWS, ROW), dtype=np.float32)
    noise = (rng.standard_normal((POOL_ROWS, ROW), dtype=np.float32) * np.float32(1e-3)).astype(np.float32)
    return base, noise


def write_golden(path: Path, samples: int) -> None:
    base, noise = pool()
    with atomic.update(path) as f:
        store.write_dataset(f, GoldenDataset.from_arrays({"idx": np.arange(samples)}))
        group, gen = store.begin_snapshot(f, "bench")
        out = store.create_output(group, "emb", samples, (ROW,), np.float32)
        for start in range(0, samples, BATCH):
            k = (start % POOL_ROWS)
            out[start : start + BATCH] = base[k : k + BATCH] + noise[k : k + BATCH]
        store.finish_snapshot(group, generation=gen, provenance=PROV, baselines={}, record_json=None)


def compare_only(path: Path) -> dict[str, float]:
    """Stream the on-disk golden against obtained batches; run in a fresh process."""
    base, _ = pool()
    acc = ElementAccumulator()
    t0 = time.perf_counter()
    with store.GoldenFile(path) as g:
        ds = g["bench"].outputs["emb"]
        samples = ds.shape[0]
        for start, rows in prefetched(ds, BATCH):
            k = start % POOL_ROWS
            acc.update(base[k : k + rows.shape[0]], rows)
    elapsed = time.perf_counter() - t0
    stats = acc.result()
    return {"bytes": samples * ROW * 4, "seconds": elapsed, "gb_per_s": samples * ROW * 4 / elapsed / 1e9,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "l2_delta": stats.l2_delta}


def bench_1gib(gib: float, folder: Path) -> dict[str, float]:
    samples = int(gib * (1 << 30)) // (ROW * 4)
    path = folder / "bench.h5"
    t0 = time.perf_counter()
    write_golden(path, samples)
    setup = time.perf_counter() - t0
    proc = subprocess.run([sys.executable, __file__, "--compare-only", str(path)], capture_output=True, text=True,
                          check=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["write_seconds"] = setup
    result["file_bytes"] = path.stat().st_size
    return result


def bench_vs_polygraphy(mib: int, folder: Path) -> dict[str, float]:
    from polygraphy.comparator import Comparator, IterationResult, RunResults
    from polygraphy.comparator.compare import SimpleCompareFunc

    rng = np.random.default_rng(1)
    samples = mib * (1 << 20) // (1000 * 4)
    golden = rng.standard_normal((samples, 1000), dtype=np.float32)
    obtained = golden + np.float32(1e-4) * rng.standard_normal(golden.shape, dtype=np.float32)

    # this store: save (atomic, locked), then reload and compare
    path = folder / "side.h5"
    t0 = time.perf_counter()
    with atomic.update(path) as f:
        store.write_dataset(f, GoldenDataset.from_arrays({"idx": np.arange(samples)}))
        group, gen = store.begin_snapshot(f, "side")
        store.create_output(group, "logits", samples, (1000,), np.float32)[...] = golden
        store.finish_snapshot(group, generation=gen, provenance=PROV, baselines={}, record_json=None)
    t1 = time.perf_counter()
    acc = ElementAccumulator()
    with store.GoldenFile(path) as g:
        for start, rows in prefetched(g["side"].outputs["logits"], BATCH):
            acc.update(obtained[start : start + rows.shape[0]], rows)
    ours_l2 = acc.result().l2_delta
    t2 = time.perf_counter()

    # Polygraphy: --save-outputs JSON, then --load-outputs style comparison
    jpath = folder / "side.json"
    t3 = time.perf_counter()
    saved = RunResults()
    saved.append(("golden", [IterationResult({"logits": golden}, runner_name="golden")]))
    saved.save(str(jpath))
    t4 = time.perf_counter()
    loaded = RunResults.load(str(jpath))
    loaded.append(("obtained", [IterationResult({"logits": obtained}, runner_name="obtained")]))
    accuracy = Comparator.compare_accuracy(loaded, compare_func=SimpleCompareFunc(atol=1e-2, rtol=1e-2))
    t5 = time.perf_counter()
    return {
        "mib": mib, "ours_save_s": t1 - t0, "ours_compare_s": t2 - t1, "ours_bytes": path.stat().st_size,
        "poly_save_s": t4 - t3, "poly_compare_s": t5 - t4, "poly_bytes": jpath.stat().st_size,
        "save_speedup": (t4 - t3) / (t1 - t0), "compare_speedup": (t5 - t4) / (t2 - t1),
        "size_ratio_poly_over_ours": jpath.stat().st_size / path.stat().st_size,
        "ours_l2_delta": ours_l2, "poly_passed": bool(accuracy),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--poly-mib", type=int, default=64)
    parser.add_argument("--compare-only", type=Path)
    args = parser.parse_args()
    if args.compare_only:
        print(json.dumps(compare_only(args.compare_only)))
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        big = bench_1gib(args.gib, Path(tmp))
        print(f"compare {big['bytes'] / 2**30:.2f} GiB float32 vs golden on disk: {big['gb_per_s']:.2f} GB/s "
              f"({big['seconds']:.2f} s), peak RSS {big['peak_rss_mib']:.0f} MiB; "
              f"golden written in {big['write_seconds']:.1f} s, file {big['file_bytes'] / 2**30:.2f} GiB")
        (Path(tmp) / "bench.h5").unlink()
        side = bench_vs_polygraphy(args.poly_mib, Path(tmp))
        print(f"side by side, {side['mib']} MiB of outputs:")
        print(f"  this store: save {side['ours_save_s']:.2f} s, reload+compare {side['ours_compare_s']:.2f} s, "
              f"file {side['ours_bytes'] / 2**20:.1f} MiB")
        print(f"  polygraphy JSON: save {side['poly_save_s']:.2f} s, reload+compare {side['poly_compare_s']:.2f} s, "
              f"file {side['poly_bytes'] / 2**20:.1f} MiB")
        print(f"  ratios (polygraphy / this store): save time {side['save_speedup']:.1f}x, "
              f"reload+compare time {side['compare_speedup']:.1f}x, file size {side['size_ratio_poly_over_ours']:.2f}x")
        print(json.dumps({"compare_1gib": big, "side_by_side": side}, indent=1))


if __name__ == "__main__":
    main()
