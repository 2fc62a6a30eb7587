"""Golden save and check through the ``trt_golden`` fixture, run by hand: ``python benchmarks/bench_golden.py``.

Every figure is timed inside a real pytest run (a test file this script
writes into its temporary folder, run with ``python -m pytest``) around
``trt_golden.check(...)``: the fixture's own object, with the options a user
passes (``--trt-golden-dir``, ``--trt-update-golden --trt-approve``,
``--trt-backend onnxruntime --trt-engine-build``).  Batches come from an
engine's ``run()``, the golden is read from its HDF5 file, metrics,
classifier statistics and (in update mode) the approved snapshot write all
run as they do in a user's test.

1. 1 GiB of outputs, twice: classifier logits (N, 1000), declared a
   classifier (top-1, per-sample confidence/entropy/margin), and a wide
   feature map (N, 1280*7*7).  The engine (:class:`PoolEngine`) returns views
   of a precomputed 32 MiB pool so the run itself costs nothing.  Save: an
   approved update writes the golden (GB/s of outputs; target >= 0.5).
   Check: a fresh pytest process compares noisy outputs with it (GB/s,
   target >= 1; the process's peak RSS, pytest included, target < 512 MiB).
   The modules ``check()`` imports on first use are imported before the
   timer starts (a one-time cost per session, not throughput).
2. ``--incident`` (opt-in: minutes, 1.2 GB of inputs): the incident-size
   golden, 2,000 images of 3x224x224 through the torchvision-size MobileNetV2
   of ``benchmarks/models.py`` on ONNX Runtime (``trt_engine``).  In one test,
   alternating: ``trt_golden.check(trt_engine)`` and a bare ``session.run`` +
   numpy loop (same session, L2 sums and argmax), once with the inputs held in
   memory and once reading them from the golden file as the check does;
   rotating the order every round; medians, target <= 1.05.

3. ``--sizes 0.1,1,4,16`` (GiB of (N, 1000) logits; the default runs 1 above, this replaces it): per size an
   approved save and a check, each in a fresh pytest process, ``--rounds`` times (each round takes every size
   once); medians of the ratios over the rounds.  Printed against the targets:

   - the check's memory: the high-water mark of the process RSS above its RSS when ``check()`` starts
     (``/proc/self/clear_refs`` resets ``VmHWM`` there), and its growth from the smallest to the largest size
     (target < 8 MiB: memory independent of the number of samples);
   - save time linear in the size: user and sys CPU of the save, largest over the next size down, against
     the size ratio x 1.1 (4 GiB / 1 GiB <= 4.4);
   - throughput against a floor in the same process, right after the check: the golden output read from the
     HDF5 file in 32 MiB slabs with h5py, the engine's batches for each slab, ``d = (o - g)`` in float64 and
     ``d @ d`` (numpy read + L2 as written plainly; one BLAS thread in both).  check / floor in GB per wall
     second (throughput: the target, >= 0.5) and per CPU second (for information: the golden's blocks are
     hashed on another core, CPU the floor does not spend); and, for information, against the same floor
     with its buffers reused from slab to slab (no fresh pages).  The check's CPU is split into its main
     thread and the other threads (the golden's blocks checked against their approved sha256).

``BENCH_PROFILE=PATH`` (not a figure) writes cProfile stats of the main thread of each save and check to
``PATH.save`` and ``PATH.check``.

Each ratio is printed next to its target.  The temporary folder is removed at
exit (``BENCH_DIR`` chooses where it is made).
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_trt.artifact import BuildResult  # noqa: E402
from pytest_trt.buildlog.record import BuildRecord  # noqa: E402
from pytest_trt.config import BuildConfig  # noqa: E402

POOL_BYTES = 32 << 20
KINDS: dict[str, tuple[tuple[int, ...], int, bool]] = {  # sample shape, batch, classifier
    "logits": ((1000,), 256, True),
    "features": ((1280 * 7 * 7,), 32, False),
}
INCIDENT_BATCH = 32

POOL_TEST = '''
import os, sys
sys.path.insert(0, os.environ["BENCH_REPO"])
from benchmarks.bench_golden import pool_round


def test_pool(trt_golden):
    pool_round(trt_golden)
'''

INCIDENT_TEST = '''
import os, sys
import pytest
sys.path.insert(0, os.environ["BENCH_REPO"])
from benchmarks.bench_golden import incident_config, incident_round


@pytest.mark.trt(incident_config())
def test_incident(trt_engine, trt_golden):
    incident_round(trt_engine, trt_golden)
'''


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


def _env(name: str) -> str:
    return os.environ[f"BENCH_{name}"]


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _write(result: dict[str, Any]) -> None:
    Path(_env("OUT")).write_text(json.dumps(result), encoding="utf-8")


def _reset_hwm() -> bool:
    """Reset the process's RSS high-water mark to its current RSS (Linux ``clear_refs`` 5); False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
        return True
    except OSError:
        return False


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def floor_l2(path: Path, engine: PoolEngine, samples: int, batch: int, *,
             reuse: bool) -> tuple[float, float, float]:
    """numpy read + L2: the golden output read in 32 MiB slabs with h5py, the engine's batches for each slab,
    ``d = (o - g)`` in float64 and ``d @ d``; (wall s, CPU s, the L2 norm of the difference).

    ``reuse=False`` is numpy as written plainly (``g = ds[a:b]``, ``(o - g).astype(np.float64)``: fresh arrays per
    slab); ``reuse=True`` reads into and computes in buffers kept from slab to slab (no page faults after the first).
    """
    import h5py

    t0, c0 = time.perf_counter(), time.process_time()
    total = 0.0
    with h5py.File(path, "r") as f:
        ds = f["snapshots/logits/outputs/out"]
        row = int(np.prod(ds.shape[1:])) * ds.dtype.itemsize
        slab = max(batch, (32 << 20) // row // batch * batch)
        g_buf, o_buf = np.empty((slab, *ds.shape[1:]), ds.dtype), np.empty((slab, *ds.shape[1:]), ds.dtype)
        d_buf = np.empty(g_buf.size, np.float64)
        for start in range(0, samples, slab):
            n = min(slab, samples - start)
            runs = (engine.run({"idx": np.arange(start + b, start + min(b + batch, n))})["out"]
                    for b in range(0, n, batch))
            if not reuse:
                g = ds[start : start + n]
                d = (np.concatenate(list(runs)) - g).astype(np.float64).ravel()
                total += float(d @ d)
                continue
            g, o = g_buf[:n], o_buf[:n]
            ds.read_direct(g, source_sel=np.s_[start : start + n])
            for b, out in zip(range(0, n, batch), runs, strict=True):
                o[b : b + batch] = out
            np.subtract(o, g, out=o)
            d = d_buf[: o.size]
            np.copyto(d, o.reshape(-1))
            total += float(d @ d)
    return time.perf_counter() - t0, time.process_time() - c0, float(np.sqrt(total))


def _warm_imports() -> None:
    """Import what check() imports on first use, so a figure is throughput, not a one-time import.

    (Here every module is compiled from source in each process: PYTHONDONTWRITEBYTECODE=1.)
    """
    import h5py  # noqa: F401

    from pytest_trt.golden import timing, updating, verifying  # noqa: F401


def pool_round(trt_golden: Any) -> None:
    """Inside the pytest run: one approved save or one check of a 1 GiB pool golden."""
    from pytest_trt.golden.dataset import GoldenDataset

    kind, folder = _env("KIND"), Path(_env("FOLDER"))
    sample, batch, classifier = KINDS[kind]
    row = 4 * int(np.prod(sample))
    samples = (int(float(_env("GIB")) * (1 << 30)) // row) // batch * batch
    config = BuildConfig(name=kind, onnx=folder / f"{kind}.onnx")
    update = bool(trt_golden.settings.update)
    engine = PoolEngine(config, sample, noisy=not update)
    if update:
        kwargs: dict[str, Any] = {"dataset": GoldenDataset.from_arrays({"idx": np.arange(samples)}),
                                  "classifier": classifier}
    else:  # loose thresholds: the noise is there to make every metric work, not to fail
        kwargs = {"l2_delta": 1.0, "max_abs": 1.0, **({"drift_sd": 1e9} if classifier else {})}
    _warm_imports()
    reset = _reset_hwm()
    rss0 = _status_kib("VmRSS")
    t0, c0, r0 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
    m0 = resource.getrusage(resource.RUSAGE_THREAD)
    if os.environ.get("BENCH_PROFILE"):  # where the save's or check's time goes (not a figure): PATH.save / .check
        import cProfile

        with cProfile.Profile() as prof:
            result = trt_golden.check(engine, batch_size=batch, **kwargs)
        prof.dump_stats(f"{os.environ['BENCH_PROFILE']}.{'save' if update else 'check'}")
    else:
        result = trt_golden.check(engine, batch_size=batch, **kwargs)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    r1, m1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_THREAD)
    main_cpu = (m1.ru_utime - m0.ru_utime) + (m1.ru_stime - m0.ru_stime)
    size = samples * row
    out: dict[str, Any] = {"bytes": size, "samples": samples, "seconds": seconds, "gb_per_s": size / seconds / 1e9,
                           "cpu_s": cpu, "user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
                           "gb_per_cpu_s": size / cpu / 1e9, "peak_rss_mib": _peak_rss_mib(),
                           "main_thread_cpu_s": main_cpu, "other_threads_cpu_s": cpu - main_cpu,
                           "hwm_above_start_mib": (_status_kib("VmHWM") - rss0) / 1024 if reset else None}
    if update:
        out["file_bytes"] = result.path.stat().st_size
    else:
        m = result.metrics["out"]
        out.update(top1_agreement=m.top1_agreement, l2_delta=m.elements.l2_delta, checked=m.elements.count * 4)
        if os.environ.get("BENCH_FLOOR"):
            wall, fcpu, l2 = floor_l2(result.path, engine, samples, batch, reuse=False)
            rwall, rcpu, _ = floor_l2(result.path, engine, samples, batch, reuse=True)
            out.update(floor_s=wall, floor_cpu_s=fcpu, floor_l2_norm=l2, tuned_floor_s=rwall, tuned_floor_cpu_s=rcpu,
                       check_l2_norm=m.elements.l2_delta * m.elements.golden_norm)
    _write(out)


def _pytest(folder: Path, test: str, source: str, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    path = folder / test
    path.write_text(source, encoding="utf-8")
    out = folder / "result.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", str(path), "-q", "-p", "no:cacheprovider", "--rootdir", str(folder),
           "--trt-golden-dir", str(folder / "golden"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder,
                          env={**os.environ, "BENCH_REPO": str(REPO), "BENCH_FOLDER": str(folder),
                               "BENCH_OUT": str(out), **env})
    if proc.returncode or not out.is_file():
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return dict(json.loads(out.read_text(encoding="utf-8")))


UPDATE_ARGS = ["--trt-update-golden", "--trt-approve", "benchmark"]


def bench_1gib(folder: Path, gib: float, rounds: int) -> None:
    for kind in KINDS:
        (folder / f"{kind}.onnx").write_bytes(b"benchmark stand-in")  # the provenance hashes it; nothing builds it
        env = {"BENCH_KIND": kind, "BENCH_GIB": str(gib)}
        saves, checks = [], []
        for _ in range(rounds):
            shutil.rmtree(folder / "golden", ignore_errors=True)
            saves.append(_pytest(folder, "test_bench_pool.py", POOL_TEST, UPDATE_ARGS, env))
            checks.append(_pytest(folder, "test_bench_pool.py", POOL_TEST, [], env))
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
        shutil.rmtree(folder / "golden", ignore_errors=True)


def bench_sizes(folder: Path, sizes: list[float], rounds: int) -> None:
    """Save and check of (N, 1000) logits at each size, ``rounds`` times: check memory growth, save linearity,
    check vs floor; medians of the ratios over the rounds."""
    kind = "logits"
    (folder / f"{kind}.onnx").write_bytes(b"benchmark stand-in")
    # one BLAS thread: the floor's d @ d would otherwise count idle BLAS threads' spinning as CPU
    blas = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    runs: dict[float, list[tuple[dict[str, Any], dict[str, Any], float]]] = {gib: [] for gib in sizes}
    for r in range(rounds):
        for gib in sizes:  # every size once per round: load changes spread over all sizes alike
            env = {"BENCH_KIND": kind, "BENCH_GIB": str(gib), "BENCH_FLOOR": "1", **blas}
            shutil.rmtree(folder / "golden", ignore_errors=True)
            save = _pytest(folder, "test_bench_pool.py", POOL_TEST, UPDATE_ARGS, env)
            check = _pytest(folder, "test_bench_pool.py", POOL_TEST, [], env)
            shutil.rmtree(folder / "golden", ignore_errors=True)
            load = os.getloadavg()[0]
            runs[gib].append((save, check, load))
            size = check["bytes"]
            hwm = check["hwm_above_start_mib"]
            print(f"round {r + 1}: logits {gib:g} GiB ({check['samples']:,} samples; load {load:.1f}):"
                  f" save {save['seconds']:.1f} s (user {save['user_s']:.2f} + sys {save['sys_s']:.2f} s),"
                  f" check {check['seconds']:.2f} s / {check['cpu_s']:.2f} CPU-s (main thread"
                  f" {check['main_thread_cpu_s']:.2f}, other threads: the blocks' sha256"
                  f" {check['other_threads_cpu_s']:.2f}),"
                  f" check RSS high-water above its start {'n/a' if hwm is None else f'{hwm:.1f} MiB'},"
                  f" process peak {check['peak_rss_mib']:.0f} MiB", flush=True)
            print(f"  check vs floor (numpy: h5py 32 MiB slabs, (o - g).astype(float64), d @ d; same process, after"
                  f" the check): per CPU-s {size / check['cpu_s'] / 1e9:.2f} vs {size / check['floor_cpu_s'] / 1e9:.2f}"
                  f" GB/s = {check['floor_cpu_s'] / check['cpu_s']:.2f},"
                  f" wall {check['floor_s'] / check['seconds']:.2f};"
                  f" tuned floor (buffers reused) {check['tuned_floor_cpu_s'] / check['cpu_s']:.2f}"
                  f"   (|o - g| check {check['check_l2_norm']:.6g}, floor {check['floor_l2_norm']:.6g})", flush=True)
    med = statistics.median
    print(f"medians of {rounds} round(s):")
    for gib in sizes:
        rs = runs[gib]
        cpu = med(c["floor_cpu_s"] / c["cpu_s"] for _, c, _ in rs)
        walls = [c["floor_s"] / c["seconds"] for _, c, _ in rs]
        wall = med(walls)
        loads = [f"{x:.1f}" for _, _, x in rs]
        print(f"  check / floor at {gib:g} GiB: throughput (per wall-s) {wall:.2f}, range "
              f"{min(walls):.2f}-{max(walls):.2f}   target >= 0.5   "
              f"{'MET' if wall >= 0.5 else 'NOT MET'};  per CPU-s {cpu:.2f} (the blocks' sha256 on another core "
              f"included)   (load {', '.join(loads)})")
    hwms = [c["hwm_above_start_mib"] for _, c, _ in runs[sizes[-1]] + runs[sizes[0]]]
    if len(sizes) > 1 and None not in hwms:
        growth = max(c["hwm_above_start_mib"] for _, c, _ in runs[sizes[-1]]) - \
            min(c["hwm_above_start_mib"] for _, c, _ in runs[sizes[0]])
        print(f"  check memory growth {sizes[0]:g} -> {sizes[-1]:g} GiB: {growth:+.1f} MiB   target < 8 MiB   "
              f"{'MET' if growth < 8 else 'NOT MET'}")
    for ga, gb in zip(sizes, sizes[1:], strict=False):
        limit = gb / ga * 1.1
        pairs = list(zip(runs[ga], runs[gb], strict=True))  # the same round: measured minutes apart

        def ratio(key: str, pairs: Any = pairs) -> float:
            return float(med(sum(b[k] for k in key.split("+")) / max(sum(a[k] for k in key.split("+")), 1e-9)
                             for (a, _, _), (b, _, _) in pairs))
        cpu_ratio = ratio("user_s+sys_s")
        print(f"  save CPU {gb:g} GiB / {ga:g} GiB: {cpu_ratio:.2f}x (user {ratio('user_s'):.2f}x, sys"
              f" {ratio('sys_s'):.2f}x; wall {ratio('seconds'):.2f}x)   target <= {limit:.2f}   "
              f"{'MET' if cpu_ratio <= limit else 'NOT MET'}")
    print("  " + json.dumps([{"gib": g, "round": i + 1, "load": x, "save": s, "check": c}
                             for g in sizes for i, (s, c, x) in enumerate(runs[g])]))


def incident_config() -> BuildConfig:
    """The test module's marker: the torchvision-size MobileNetV2 with a batch profile of INCIDENT_BATCH."""
    from pytest_trt.config import Profile

    batch = INCIDENT_BATCH
    shapes = ((1, 3, 224, 224), (batch, 3, 224, 224), (batch, 3, 224, 224))
    return BuildConfig(name="mnv2_224", onnx=Path(_env("FOLDER")) / "mobilenet_v2_224.onnx",
                       profiles=(Profile(input=shapes),))


def _images() -> np.ndarray:
    from benchmarks.bench_codecs import images

    return images(int(_env("SAMPLES")), np.random.default_rng(0))


def incident_round(engine: Any, trt_golden: Any) -> None:
    """Inside the pytest run: approve the incident golden, or time check() against a bare loop, alternating."""
    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.store import GoldenFile

    x, batch = _images(), INCIDENT_BATCH
    if trt_golden.settings.update:
        t0 = time.perf_counter()
        result = trt_golden.check(engine, dataset=GoldenDataset.from_arrays({"input": x}), batch_size=batch,
                                  classifier=True)
        _write({"seconds": time.perf_counter() - t0, "file_bytes": result.path.stat().st_size})
        return
    session = engine.runner.session
    name = session.get_inputs()[0].name
    with GoldenFile(trt_golden.path_for(engine.config.name)) as g:
        golden = {k: v[()] for k, v in g[engine.config.name].outputs.items()}
    first = session.get_outputs()[0].name
    samples = x.shape[0]

    def bare(source: Any) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        dd = gg = 0.0
        for i in range(0, samples, batch):
            out = session.run(None, {name: np.asarray(source[i : i + batch])})[0]
            want = golden[first][i : i + batch]
            d = (out - want).astype(np.float64).ravel()
            dd += float(np.dot(d, d))
            w = want.astype(np.float64).ravel()
            gg += float(np.dot(w, w))
            np.argmax(out, axis=1)
        return time.perf_counter() - t, time.process_time() - c

    def product() -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        trt_golden.check(engine, batch_size=batch, classifier=True)
        return time.perf_counter() - t, time.process_time() - c

    b, f, p = [], [], []
    with GoldenFile(trt_golden.path_for(engine.config.name)) as g:
        stored = g.inputs()[name]
        runs: list[tuple[list[Any], Any]] = [(b, lambda: bare(x)), (f, lambda: bare(stored)), (p, product)]
        for k in range(int(_env("ROUNDS"))):  # each round in another order: no side always goes first
            for times, timed in runs[k % 3 :] + runs[: k % 3]:
                times.append(timed())
    _write({"bare": b, "bare_file": f, "check": p, "peak_rss_mib": _peak_rss_mib()})


def bench_incident(folder: Path, samples: int, rounds: int) -> None:
    from benchmarks.models import write

    write(folder / "mobilenet_v2_224.onnx")
    env = {"BENCH_SAMPLES": str(samples), "BENCH_ROUNDS": str(rounds)}
    engine_args = ["--trt-backend", "onnxruntime", "--trt-engine-build", "--trt-cache-dir", str(folder / "cache")]
    approved = _pytest(folder, "test_bench_incident.py", INCIDENT_TEST, [*engine_args, *UPDATE_ARGS], env)
    print(f"incident golden: {samples} x 3x224x224 approved in {approved['seconds']:.1f} s, "
          f"file {approved['file_bytes'] / 2**20:.0f} MiB")
    timed = _pytest(folder, "test_bench_incident.py", INCIDENT_TEST, engine_args, env)
    b, f, p = timed["bare"], timed["bare_file"], timed["check"]
    for base, where in ((b, "inputs in memory"), (f, "inputs read from the golden file")):
        for i, what in enumerate(("wall", "CPU")):
            mp, mb = statistics.median(r[i] for r in p), statistics.median(r[i] for r in base)
            print(f"incident check ({what}): trt_golden.check {mp:.2f} s vs bare session.run+numpy {mb:.2f} s "
                  f"({where}; medians of {rounds}, alternating): ratio {mp / mb:.3f}   target <= 1.05   "
                  f"{'MET' if mp / mb <= 1.05 else 'NOT MET'}")
    pairs = [x[0] / y[0] for x, y in zip(p, b, strict=True)]
    print("  " + json.dumps({"bare_s": b, "bare_file_s": f, "check_s": p, "pair_ratios_wall": pairs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--incident", action="store_true", help="also the 2,000-image MobileNetV2 golden (minutes)")
    parser.add_argument("--incident-only", action="store_true")
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--sizes", help="GiB of logits, comma separated (e.g. 0.1,1,4,16): memory, linearity, floor")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR"), prefix="bench_golden_") as tmp:
        if args.sizes:
            bench_sizes(Path(tmp), [float(x) for x in args.sizes.split(",")], args.rounds)
        elif not args.incident_only:
            bench_1gib(Path(tmp), args.gib, args.rounds)
        if args.incident or args.incident_only:
            bench_incident(Path(tmp), args.samples, args.rounds)


if __name__ == "__main__":
    main()
