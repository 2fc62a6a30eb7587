"""Golden save and check through the product path, run by hand: ``python benchmarks/bench_golden.py``.

Every figure goes through :meth:`pytest_trt.golden.workflow.GoldenCheck.check`,
the ``trt_golden.check`` of a test: batches come from an engine's ``run()``,
the golden is read from its HDF5 file, metrics, classifier statistics and
(in update mode) the approved snapshot write all run as they do in a test.

1. 1 GiB of outputs, twice: classifier logits (N, 1000), declared a
   classifier (top-1, per-sample confidence/entropy/margin), and a wide
   feature map (N, 1280*7*7).  The "engine" returns views of a precomputed
   32 MiB pool so the run itself costs nothing.  Save: the approved update
   writes the golden (GB/s of outputs; target >= 0.5).  Check: a fresh
   process compares noisy outputs with it (GB/s, target >= 1; peak RSS,
   target < 512 MiB).
2. ``--incident``: the incident-size golden, 2,000 images of 3x224x224
   through the torchvision-size MobileNetV2 of ``benchmarks/models.py`` on a
   real ONNX Runtime engine; ``check()`` against a bare ``session.run`` +
   numpy loop over the same inputs held in memory, alternating, medians
   (target <= 1.05).  Takes minutes.

Temporary folders are removed at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_trt.artifact import BuildResult  # noqa: E402
from pytest_trt.buildlog.record import BuildRecord  # noqa: E402
from pytest_trt.config import BuildConfig  # noqa: E402
from pytest_trt.golden.dataset import GoldenDataset  # noqa: E402
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings  # noqa: E402

POOL_BYTES = 32 << 20
KINDS: dict[str, tuple[tuple[int, ...], int, bool]] = {  # sample shape, batch, classifier
    "logits": ((1000,), 256, True),
    "features": ((1280 * 7 * 7,), 32, False),
}


class PoolEngine:
    """An engine whose outputs are views of a fixed pool (golden + optional noise): run() costs nothing."""

    def __init__(self, config: BuildConfig, sample: tuple[int, ...], *, noisy: bool) -> None:
        rows = max(1, POOL_BYTES // (4 * int(np.prod(sample))))
        rng = np.random.default_rng(0)
        base = rng.standard_normal((rows, *sample), dtype=np.float32)
        if noisy:
            base += rng.standard_normal(base.shape, dtype=np.float32) * np.float32(1e-3)
        self.pool, self.rows = base, rows
        self.config = config
        self.result = BuildResult(backend="bench", engine=b"", log=(), config={}, effective_config={},
                                  config_hash=config.config_hash, onnx_sha256=config.onnx_sha256, durations={},
                                  versions={}, device={"kind": "cpu"}, backend_version="0")
        self.record = BuildRecord(source="bench")
        self.label, self.backend_name = config.name, "bench"

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        idx = feeds["idx"]
        k = int(idx[0]) % self.rows
        n = idx.shape[0]
        if k + n <= self.rows:
            return {"out": self.pool[k : k + n]}
        return {"out": self.pool[np.arange(k, k + n) % self.rows]}


def _config(folder: Path, kind: str) -> BuildConfig:
    onnx = folder / f"{kind}.onnx"
    onnx.write_bytes(b"benchmark stand-in")  # the golden's provenance hashes it; nothing builds it
    return BuildConfig(name=kind, onnx=onnx)


def _golden(folder: Path, *, update: bool = False) -> GoldenCheck:
    settings = GoldenSettings(golden_dir=folder / "golden", update=update, approve="benchmark" if update else None)
    return GoldenCheck(settings, nodeid="bench_golden.py::bench")


def save(folder: Path, kind: str, gib: float) -> dict[str, float]:
    sample, batch, classifier = KINDS[kind]
    row = 4 * int(np.prod(sample))
    samples = (int(gib * (1 << 30)) // row) // batch * batch
    engine = PoolEngine(_config(folder, kind), sample, noisy=False)
    dataset = GoldenDataset.from_arrays({"idx": np.arange(samples)})
    t0, c0 = time.perf_counter(), time.process_time()
    _golden(folder, update=True).check(engine, dataset=dataset, batch_size=batch, classifier=classifier)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    path = folder / "golden" / f"{kind}.h5"
    return {"bytes": samples * row, "seconds": seconds, "gb_per_s": samples * row / seconds / 1e9,
            "cpu_s": cpu, "gb_per_cpu_s": samples * row / cpu / 1e9,
            "file_bytes": path.stat().st_size}


def check_only(folder: Path, kind: str) -> dict[str, float]:
    """Run in a fresh process: the setup's memory must not count."""
    sample, batch, classifier = KINDS[kind]
    engine = PoolEngine(_config(folder, kind), sample, noisy=True)
    loose: dict[str, float] = {"l2_delta": 1.0, "max_abs": 1.0, **({"drift_sd": 1e9} if classifier else {})}
    t0, c0 = time.perf_counter(), time.process_time()
    result: Any = _golden(folder).check(engine, batch_size=batch, **loose)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = result.metrics["out"]
    size = m.elements.count * 4
    return {"bytes": size, "seconds": seconds, "gb_per_s": size / seconds / 1e9, "cpu_s": cpu,
            "gb_per_cpu_s": size / cpu / 1e9, "classifier": classifier,
            "top1_agreement": m.top1_agreement, "l2_delta": m.elements.l2_delta,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def bench_1gib(folder: Path, gib: float, rounds: int) -> None:
    for kind in KINDS:
        saves, checks = [], []
        for _ in range(rounds):
            shutil.rmtree(folder / "golden", ignore_errors=True)
            saves.append(save(folder, kind, gib))
            proc = subprocess.run([sys.executable, __file__, "--check-only", str(folder), kind],
                                  capture_output=True, text=True)
            if proc.returncode:
                sys.exit(proc.stdout + proc.stderr)
            checks.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        s = statistics.median(r["gb_per_s"] for r in saves)
        c = statistics.median(r["gb_per_s"] for r in checks)
        rss = max(r["peak_rss_mib"] for r in checks)
        sc = statistics.median(r["gb_per_cpu_s"] for r in saves)
        cc = statistics.median(r["gb_per_cpu_s"] for r in checks)
        print(f"{kind}: {checks[0]['bytes'] / 2**30:.2f} GiB, {rounds} rounds, medians "
              f"(file {saves[0]['file_bytes'] / 2**30:.2f} GiB)")
        print(f"  save  (approved update)  {s:5.2f} GB/s   target >= 0.5   {'MET' if s >= 0.5 else 'NOT MET'}"
              f"   (per CPU second: {sc:.2f} GB/s)")
        print(f"  check (trt_golden.check) {c:5.2f} GB/s   target >= 1.0   {'MET' if c >= 1.0 else 'NOT MET'}"
              f"   (per CPU second: {cc:.2f} GB/s)")
        print(f"  check peak RSS (max)     {rss:5.0f} MiB   target < 512    {'MET' if rss < 512 else 'NOT MET'}")
        print("  " + json.dumps({"save": saves, "check": checks}))


def bench_incident(folder: Path, samples: int, rounds: int, batch: int) -> None:
    import onnxruntime as ort

    from benchmarks.bench_codecs import images
    from benchmarks.models import write
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.config import Profile
    from pytest_trt.engine import Engine

    onnx = write(folder / "mobilenet_v2_224.onnx")
    shapes = ((1, 3, 224, 224), (batch, 3, 224, 224), (batch, 3, 224, 224))
    config = BuildConfig(name="mnv2_224", onnx=onnx, profiles=(Profile(input=shapes),))
    backend = OrtBackend()
    engine = Engine(config, backend.build(config), backend)
    x = images(samples, np.random.default_rng(0))
    dataset = GoldenDataset.from_arrays({"input": x})
    t0 = time.perf_counter()
    _golden(folder, update=True).check(engine, dataset=dataset, batch_size=batch, classifier=True)
    print(f"incident golden: {samples} x 3x224x224 approved in {time.perf_counter() - t0:.1f} s, "
          f"file {(folder / 'golden' / 'mnv2_224.h5').stat().st_size / 2**20:.0f} MiB")
    session = engine.runner.session if hasattr(engine.runner, "session") else None
    if session is None:
        session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    golden = np.concatenate([session.run(None, {"input": x[i : i + batch]})[0] for i in range(0, samples, batch)])

    def bare() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        dd = gg = 0.0
        for i in range(0, samples, batch):
            out = session.run(None, {"input": x[i : i + batch]})[0]
            d = (out - golden[i : i + batch]).astype(np.float64)
            dd += float(np.dot(d.ravel(), d.ravel()))
            gg += float(np.dot(golden[i : i + batch].ravel().astype(np.float64), golden[i : i + batch].ravel()))
            np.argmax(out, axis=1)
        return time.perf_counter() - t, time.process_time() - c

    def product() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        _golden(folder).check(engine, batch_size=batch, classifier=True)
        return time.perf_counter() - t, time.process_time() - c

    b, p = [], []
    for _ in range(rounds):
        b.append(bare())
        p.append(product())
    for i, what in enumerate(("wall", "CPU")):
        mp, mb = statistics.median(r[i] for r in p), statistics.median(r[i] for r in b)
        print(f"incident check ({what}): trt_golden.check {mp:.2f} s vs bare session.run+numpy {mb:.2f} s "
              f"(medians of {rounds}, alternating): ratio {mp / mb:.3f}   target <= 1.05   "
              f"{'MET' if mp / mb <= 1.05 else 'NOT MET'}")
    pairs = [x[0] / y[0] for x, y in zip(p, b, strict=True)]
    print("  " + json.dumps({"bare_s": b, "check_s": p, "pair_ratios_wall": pairs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--incident", action="store_true", help="also the 2,000-image MobileNetV2 golden (minutes)")
    parser.add_argument("--incident-only", action="store_true")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--check-only", nargs=2, metavar=("FOLDER", "KIND"))
    args = parser.parse_args()
    if args.check_only:
        print(json.dumps(check_only(Path(args.check_only[0]), args.check_only[1])))
        return
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR"), prefix="bench_golden_") as tmp:
        if not args.incident_only:
            bench_1gib(Path(tmp), args.gib, args.rounds)
        if args.incident or args.incident_only:
            shutil.rmtree(Path(tmp) / "golden", ignore_errors=True)
            bench_incident(Path(tmp), args.samples, args.rounds, 32)


if __name__ == "__main__":
    main()
