"""Catalog indexing and query speed (run by hand).

    python benchmarks/bench_catalog.py [--bundles 1000] [--rows 10000] [--runs 20]

1. Index N bundles of a small real engine (conv_bn_relu built by TensorRT-RTX,
   or ONNX Runtime where RTX is missing) with ``Catalog.add_paths(folder)``,
   the path ``pytest-trt catalog add DIR`` takes: verification of every
   bundle, then batched inserts.  Side by side in the same run: verifying the
   same bundles alone (``verify_bundle``), so the ratio is the catalog's own
   cost.  Target: 1,000 bundles in under 30 s.
2. A filtered query (backend version glob, device, calibration, verdict) over
   a catalog of M rows: the N indexed bundles plus rows derived from them with
   varied configs, versions, devices, calibrators and verdicts, inserted
   through the same ``add_entries``.  Timed: ``query(catalog, Filters(...))``
   and, for comparison, the same query without filters (all current rows).
   Target: under 100 ms (median).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.models import write_all  # noqa: E402
from pytest_trt.audit.bundle import write_bundle  # noqa: E402
from pytest_trt.audit.environment import capture_environment  # noqa: E402
from pytest_trt.audit.verify import verify_bundle  # noqa: E402
from pytest_trt.catalog.fields import Verdict  # noqa: E402
from pytest_trt.catalog.query import Filters, query  # noqa: E402
from pytest_trt.catalog.store import Catalog, verify_entry  # noqa: E402
from pytest_trt.config import BuildConfig, Profile  # noqa: E402


def small_build(folder: Path):  # type: ignore[no-untyped-def]
    onnx = write_all(folder)["conv_bn_relu"]
    config = BuildConfig(name="cbr", version="1.0", onnx=onnx,
                         profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])
    try:
        from pytest_trt.backends.tensorrt import TensorRTBackend

        return TensorRTBackend(module="tensorrt_rtx").build(config), None
    except Exception as exc:  # noqa: BLE001 - fall back to ONNX Runtime where RTX is missing
        from pytest_trt.backends.onnxruntime import OrtBackend

        return OrtBackend().build(config), exc


def write_bundles(result, folder: Path, n: int) -> list[Path]:  # type: ignore[no-untyped-def]
    from pytest_trt.buildlog.readers import parse_entries

    record = parse_entries(result.log) if result.backend != "onnxruntime" else None
    env = capture_environment(backend=result.backend, rootdir=None)
    paths = []
    for i in range(n):
        golden = {f"tests/test_m.py::test_{i}": {"config_hash": result.config_hash, "verdict": "pass",
                                                  "l2_delta": i / n}}
        paths.append(write_bundle(result, folder, record=record, environment=env, golden_results=golden,
                                  name=f"cbr-{i:05d}.tar.gz").path)
    return paths


def bench_index(paths: list[Path], db: Path) -> None:
    t0 = time.perf_counter()
    for p in paths:
        verify_bundle(p)
    verify_s = time.perf_counter() - t0
    with Catalog(db) as cat:
        t0 = time.perf_counter()
        results = cat.add_paths([paths[0].parent])
        index_s = time.perf_counter() - t0
        assert sum(r.status == "added" for r in results) == len(paths), "not every bundle was added"
        t0 = time.perf_counter()
        again = cat.add_paths([paths[0].parent])
        reindex_s = time.perf_counter() - t0
        assert all(r.status == "known" for r in again)
    n = len(paths)
    print(f"index {n} bundles (catalog add DIR): {index_s:.2f} s ({index_s / n * 1000:.1f} ms/bundle); "
          f"target < 30 s for 1,000 -> {'OK' if index_s * 1000 / n < 30 else 'MISSED'}")
    print(f"  verify_bundle alone, same bundles: {verify_s:.2f} s; ratio index/verify {index_s / verify_s:.2f}")
    print(f"  same folder again (all already indexed): {reindex_s:.2f} s")


def fill(db: Path, paths: list[Path], rows: int) -> None:
    rng = random.Random(0)
    base = verify_entry(paths[0])
    assert not isinstance(base, Exception) and hasattr(base, "columns")
    with Catalog(db) as cat:
        have = cat.count()
        extra = []
        for i in range(rows - have):
            sha = hashlib.sha256(f"row {i}".encode()).hexdigest()
            backend, version = rng.choice([("tensorrt", "8.5.3.1"), ("tensorrt", "8.6.1.6"), ("tensorrt", "10.3.0.26"),
                                           ("tensorrt-rtx", "1.7.1.116"), ("onnxruntime", "1.23.2")])
            verdict = rng.choice(["pass"] * 8 + ["fail", "updated"])
            extra.append(dataclasses.replace(
                base, sha256=sha, path=f"/archive/{sha[:2]}/{sha}.tar.gz", config_name=f"model_{rng.randrange(50)}",
                config_version=f"{rng.randrange(5)}.{rng.randrange(10)}", backend=backend, backend_version=version,
                device=rng.choice(["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4", "cpu-aot"]),
                engine_sha256=hashlib.sha256(sha.encode()).hexdigest(),
                calibration_algorithm=rng.choice(["minmax", "entropy2", None, None]),
                created=f"2026-{rng.randrange(1, 12):02d}-{rng.randrange(1, 28):02d}T00:00:00Z",
                verdicts=(Verdict("tests/test_m.py::test_acc", verdict, "goldens/m.h5", 1, None, {"l2_delta": 0.1}),),
                approvals=()))
        for start in range(0, len(extra), 1000):
            cat.add_entries(extra[start:start + 1000])
        assert cat.count() == rows, cat.count()


def bench_query(db: Path, runs: int) -> None:
    filters = Filters(backend_version="8.6.*", device="A100", calibration="minmax", verdict="regression")
    with Catalog(db) as cat:
        n = cat.count()
        times, found = [], 0
        all_times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            found = len(query(cat, filters))
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            everything = len(query(cat, Filters()))
            all_times.append(time.perf_counter() - t0)
    med, worst = statistics.median(times) * 1000, max(times) * 1000
    print(f"filtered query over {n} rows (8.6.* on A100, minmax, regression): {found} rows, median {med:.1f} ms, "
          f"max {worst:.1f} ms; target < 100 ms -> {'OK' if med < 100 else 'MISSED'}")
    print(f"  unfiltered query ({everything} rows) median {statistics.median(all_times) * 1000:.1f} ms; "
          f"ratio filtered/unfiltered {statistics.median(times) / statistics.median(all_times):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundles", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result, why = small_build(folder / "models")
        engine_kb = len(result.engine) / 1024
        print(f"engine: conv_bn_relu by {result.backend} ({engine_kb:.0f} KiB)"
              + (f" (TensorRT-RTX unavailable: {why})" if why else ""))
        t0 = time.perf_counter()
        paths = write_bundles(result, folder / "trt-bundles", args.bundles)
        size = sum(p.stat().st_size for p in paths) / len(paths) / 1024
        print(f"wrote {len(paths)} bundles ({size:.0f} KiB each) in {time.perf_counter() - t0:.1f} s (not timed below)")
        db = folder / "catalog.sqlite"
        bench_index(paths, db)
        fill(db, paths, args.rows)
        bench_query(db, args.runs)


if __name__ == "__main__":
    main()
