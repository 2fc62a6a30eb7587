"""What the golden digests cost a check of a 1 GiB golden, run by hand: ``python benchmarks/bench_golden_digest.py``.

A golden of 1 GiB of classifier logits (N, 1000) float32 is written by an approved update (``GoldenCheck`` in
update mode, the engine of ``benchmarks/bench_golden.py``: outputs are views of a pool, so running costs
nothing), then checked, alternating, ``--rounds`` times each (medians):

* ``check``: the check as shipped: the file's sha256 against ``<config>.h5.sha256`` before h5py opens it;
  the APPROVALS.jsonl line of the generation vouches for those bytes, so slabs are not hashed again;
* ``check, slabs hashed``: the same without APPROVALS.jsonl: every input and output slab is hashed as the
  check reads it too (a golden whose digest file is not backed by the log);
* ``bare``: the same check with both digests switched off (what the check cost before them);
* ``file sha256``: the file digest alone, as the check computes it (page cache warm, as in the check).

``--model mobilenet``: the same with a real engine instead: 1 GiB of golden inputs (images of 3x224x224) through
the torchvision-size MobileNetV2 of ``benchmarks/models.py`` built and run by the product's ONNX Runtime backend
(one round: minutes).

``--session``: the path the product takes, for both cases (``--model`` picks one): a pytest project whose test runs
``trt_golden.check`` (the stand-in through the ``@pytest.mark.trt`` config; MobileNetV2 through ``trt_engine``,
built by ONNX Runtime in each session), approved once, then ``pytest`` run in a fresh process per round, alternating:
``blocks, started early`` (as shipped: the golden's blocks checked on another core from when the test begins, h5py
reading through the reader that hands it checked blocks only), ``blocks, started at the check`` (the same with no
early start), ``whole file hashed`` (the whole file's sha256 checked before h5py opens it by path, as before blocks
were logged), ``bare, through the block reader`` (no check, h5py reading through the same reader: the digest's own
cost is the first line against this one) and ``bare`` (no digests, h5py reading the path).  It prints, per variant,
the session's wall time and the ``check()`` call's own time (medians, and each round's), with the ratios to
``bare``, and the load average.

The target: the digests cost under 5 % of the check, or run within its read.  ``BENCH_DIR`` chooses where the
1 GiB file goes (default: the system's temporary folder); it is removed at exit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_golden import PoolEngine  # noqa: E402
from pytest_trt.common import filehash  # noqa: E402
from pytest_trt.config import BuildConfig  # noqa: E402
from pytest_trt.golden import array_digests, integrity  # noqa: E402
from pytest_trt.golden.dataset import GoldenDataset  # noqa: E402
from pytest_trt.golden.store import GoldenFile  # noqa: E402
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings  # noqa: E402

CLASSES, BATCH = 1000, 256


def _check(folder: Path, config: BuildConfig, engine: PoolEngine) -> float:
    filehash._SHA256_MEMO.clear()  # noqa: SLF001 - each round hashes the file, as a fresh session does
    check = GoldenCheck(GoldenSettings(golden_dir=folder / "golden"))
    t0 = time.perf_counter()
    check.check(engine, batch_size=BATCH, l2_delta=1.0, max_abs=1.0, drift_sd=1e9)
    return time.perf_counter() - t0


class _Off:
    """Both digests switched off: the file is not hashed, slabs are not hashed (the check before digests)."""

    def __enter__(self) -> None:
        self.saved: dict[str, Any] = {"check_file": integrity.check_file, "open": integrity.open_checked,
                                      "update": array_digests.StreamDigest.update,
                                      "mismatch": array_digests.DigestedArray.mismatch,
                                      "small": GoldenFile.small_parts_edited}
        integrity.check_file = lambda path, **kw: None  # type: ignore[assignment]
        integrity.open_checked = lambda path: (None, None)  # type: ignore[assignment]
        array_digests.StreamDigest.update = lambda self, start, rows: None  # type: ignore[method-assign]
        array_digests.DigestedArray.mismatch = lambda self: None  # type: ignore[method-assign]
        GoldenFile.small_parts_edited = lambda self, snapshot: []  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        integrity.check_file = self.saved["check_file"]
        integrity.open_checked = self.saved["open"]
        array_digests.StreamDigest.update = self.saved["update"]  # type: ignore[method-assign]
        array_digests.DigestedArray.mismatch = self.saved["mismatch"]  # type: ignore[method-assign]
        GoldenFile.small_parts_edited = self.saved["small"]  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=("pool", "mobilenet"), default=None)
    parser.add_argument("--session", action="store_true", help="time real pytest sessions (both models by default)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-digest-", dir=os.environ.get("BENCH_DIR")))
    try:
        if args.session:
            for model in (args.model,) if args.model else ("pool", "mobilenet"):
                _session(folder / model, model, args.gib, args.rounds)
            return
        if args.model == "mobilenet":  # (None: the stand-in)
            _mobilenet(folder, args.gib, args.rounds)
            return
        onnx = folder / "logits.onnx"
        onnx.write_bytes(b"benchmark stand-in")
        config = BuildConfig(name="logits", onnx=onnx)
        samples = (int(args.gib * (1 << 30)) // (4 * CLASSES)) // BATCH * BATCH
        data = GoldenDataset.from_arrays({"idx": np.arange(samples)})
        t0 = time.perf_counter()
        GoldenCheck(GoldenSettings(golden_dir=folder / "golden", update=True, approve="benchmark")).check(
            PoolEngine(config, (CLASSES,), noisy=False), dataset=data, batch_size=BATCH, classifier=True)
        save = time.perf_counter() - t0
        path = folder / "golden" / "logits.h5"
        size = path.stat().st_size
        engine = PoolEngine(config, (CLASSES,), noisy=True)
        checks, slabs, bares, hashes = [], [], [], []
        log = folder / "golden" / "APPROVALS.jsonl"
        for _ in range(args.rounds):
            checks.append(_check(folder, config, engine))
            log.rename(log.with_suffix(".away"))
            slabs.append(_check(folder, config, engine))
            log.with_suffix(".away").rename(log)
            with _Off():
                bares.append(_check(folder, config, engine))
            filehash._SHA256_MEMO.clear()  # noqa: SLF001
            t0 = time.perf_counter()
            integrity.check_file(path)
            hashes.append(time.perf_counter() - t0)
        check, slab, bare, sha = (statistics.median(x) for x in (checks, slabs, bares, hashes))
        print(f"golden file {size / 2**30:.2f} GiB ({samples} samples x {CLASSES} logits), save {save:.1f} s, "
              f"{args.rounds} rounds, medians, CPUs {os.cpu_count()}")
        print(f"  check (file digest)                 {check:6.2f} s   {size / check / 1e9:5.2f} GB/s")
        print(f"  check, slabs hashed (no log line)   {slab:6.2f} s   {size / slab / 1e9:5.2f} GB/s")
        print(f"  bare check (no digests)             {bare:6.2f} s   {size / bare / 1e9:5.2f} GB/s")
        print(f"  file sha256 alone                   {sha:6.2f} s   {size / sha / 1e9:5.2f} GB/s")
        cost = (check - bare) / bare
        print(f"  digests cost {cost * 100:+.1f} % of the bare check   target < 5 %   "
              f"{'MET' if cost < 0.05 else 'NOT MET'}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _mobilenet(folder: Path, gib: float, rounds: int) -> None:
    from benchmarks.models import write
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.config import Profile
    from pytest_trt.engines.engine import Engine

    batch = 32
    onnx = write(folder / "mobilenet_v2_224.onnx")
    shapes = ((1, 3, 224, 224), (batch, 3, 224, 224), (batch, 3, 224, 224))
    config = BuildConfig(name="mnv2", onnx=onnx, profiles=(Profile(input=shapes),))
    backend = OrtBackend()
    engine = Engine(config, backend.build_config(config), backend)
    samples = int(gib * (1 << 30)) // (3 * 224 * 224 * 4) // batch * batch
    images = np.random.default_rng(0).random((samples, 3, 224, 224), dtype=np.float32)
    data = GoldenDataset.from_arrays({"input": images})
    del images
    GoldenCheck(GoldenSettings(golden_dir=folder / "golden", update=True, approve="benchmark")).check(
        engine, dataset=data, batch_size=batch, classifier=True)
    del data
    path = folder / "golden" / "mnv2.h5"
    size = path.stat().st_size
    checks, bares = [], []
    for _ in range(rounds):
        for timed, off in ((checks, False), (bares, True)):
            filehash._SHA256_MEMO.clear()  # noqa: SLF001
            check = GoldenCheck(GoldenSettings(golden_dir=folder / "golden"))
            t0 = time.perf_counter()
            if off:
                with _Off():
                    check.check(engine, batch_size=batch)
            else:
                check.check(engine, batch_size=batch)
            timed.append(time.perf_counter() - t0)
    filehash._SHA256_MEMO.clear()  # noqa: SLF001
    t0 = time.perf_counter()
    integrity.check_file(path)
    sha = time.perf_counter() - t0
    check_s, bare = statistics.median(checks), statistics.median(bares)
    print(f"golden file {size / 2**30:.2f} GiB ({samples} images 3x224x224 through MobileNetV2 on ONNX Runtime), "
          f"{rounds} rounds, medians, CPUs {os.cpu_count()}")
    print(f"  check (file digest)      {check_s:7.2f} s")
    print(f"  bare check (no digests)  {bare:7.2f} s")
    print(f"  file sha256 alone        {sha:7.2f} s")
    cost = (check_s - bare) / bare
    print(f"  digests cost {cost * 100:+.1f} % of the bare check (file sha256 alone: {sha / bare * 100:.1f} %)   "
          f"target < 5 %   {'MET' if cost < 0.05 else 'NOT MET'}")


_CONFTEST = '''
import os, sys, time
sys.path.insert(0, {repo!r})
import pytest
from benchmarks.bench_golden_digest import _Off
from pytest_trt.golden import blocks, integrity

VARIANT = os.environ["BENCH_DIGEST"]
if VARIANT == "bare":
    _Off().__enter__()
if VARIANT != "digest":
    integrity.prefetch = lambda path: False
if VARIANT == "whole":
    blocks.BlockVerifier.of = classmethod(lambda cls, path, key, expected: None)
if VARIANT == "reader":
    blocks.BlockVerifier.start = lambda self: True
    blocks.BlockVerifier.ensure = lambda self, start, stop: None

@pytest.fixture
def timed_check(trt_golden):
    def check(*args, **kwargs):
        t0 = time.perf_counter()
        out = trt_golden.check(*args, **kwargs)
        with open(os.environ["BENCH_OUT"], "w") as fh:
            fh.write(str(time.perf_counter() - t0))
        return out
    return check
'''

_POOL_TEST = '''
import numpy as np
import pytest
from benchmarks.bench_golden import PoolEngine
from pytest_trt import BuildConfig, GoldenDataset

CONFIG = BuildConfig(name="logits", onnx="logits.onnx")

@pytest.mark.trt(CONFIG)
def test_logits(trt_golden, timed_check):
    if trt_golden.settings.update:
        data = GoldenDataset.from_arrays({{"idx": np.arange({samples})}})
        timed_check(PoolEngine(CONFIG, (1000,), noisy=False), dataset=data, batch_size=256, classifier=True)
    else:
        timed_check(PoolEngine(CONFIG, (1000,), noisy=True), batch_size=256, l2_delta=1.0, max_abs=1.0, drift_sd=1e9)
'''

_MOBILENET_TEST = '''
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset, Profile

SHAPES = ((1, 3, 224, 224), (32, 3, 224, 224), (32, 3, 224, 224))
CONFIG = BuildConfig(name="mnv2", onnx="mobilenet_v2_224.onnx", profiles=(Profile(input=SHAPES),))

@pytest.mark.trt(CONFIG)
def test_mnv2(trt_engine, trt_golden, timed_check):
    if trt_golden.settings.update:
        images = np.random.default_rng(0).random(({samples}, 3, 224, 224), dtype=np.float32)
        timed_check(trt_engine, dataset=GoldenDataset.from_arrays({{"input": images}}), batch_size=32, classifier=True)
    else:
        timed_check(trt_engine, batch_size=32)
'''

_ARGS = ("-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--trt-backend", "onnxruntime",
         "--trt-engine-build")


def _pytest(project: Path, variant: str, *extra: str) -> tuple[float, float]:
    """(session wall seconds, check() seconds) of one ``pytest`` process in ``project``."""
    import subprocess

    out = project / "check_s.txt"
    env = {**os.environ, "BENCH_DIGEST": variant, "BENCH_OUT": str(out), "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *_ARGS, *extra], cwd=project, env=env, text=True,
                          capture_output=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"pytest ({variant}) failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    return wall, float(out.read_text())


def _session(project: Path, model: str, gib: float, rounds: int) -> None:
    project.mkdir(parents=True)
    (project / "conftest.py").write_text(_CONFTEST.format(repo=str(REPO)))
    if model == "pool":
        (project / "logits.onnx").write_bytes(b"benchmark stand-in")
        samples = (int(gib * (1 << 30)) // (4 * CLASSES)) // BATCH * BATCH
        (project / "test_bench.py").write_text(_POOL_TEST.format(samples=samples))
        what = f"stand-in engine (costs nothing), {samples} samples x {CLASSES} logits"
    else:
        from benchmarks.models import write

        write(project / "mobilenet_v2_224.onnx")
        samples = int(gib * (1 << 30)) // (3 * 224 * 224 * 4) // 32 * 32
        (project / "test_bench.py").write_text(_MOBILENET_TEST.format(samples=samples))
        what = f"MobileNetV2 on ONNX Runtime, {samples} images 3x224x224"
    _pytest(project, "digest", "--trt-update-golden", "--trt-approve", "benchmark")
    size = (project / "golden" / f"{'logits' if model == 'pool' else 'mnv2'}.h5").stat().st_size
    variants = ("digest", "inline", "whole", "reader", "bare")
    times: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    loads = []
    for i in range(rounds):
        for v in variants[i % 5:] + variants[:i % 5]:  # each variant first in turn
            times[v].append(_pytest(project, v))
        loads.append(os.getloadavg()[0])
    med = {v: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for v, t in times.items()}
    print(f"pytest session, {what}: golden {size / 2**30:.2f} GiB, {rounds} rounds, medians, CPUs {os.cpu_count()}, "
          f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}")
    print("  variant                         session s   check() s   session / bare   check / bare")
    bare_w, bare_c = med["bare"]
    labels = {"digest": "blocks, started early (shipped)", "inline": "blocks, started at the check",
              "whole": "whole file hashed, then opened", "reader": "bare, through the block reader",
              "bare": "bare (no digests)"}
    for v in variants:
        w, c = med[v]
        rounds_c = " ".join(f"{c_:.2f}" for _, c_ in times[v])
        print(f"  {labels[v]:32s}{w:9.2f}   {c:9.2f}   {w / bare_w:14.3f}   {c / bare_c:12.3f}   rounds: {rounds_c}")
    cost = (med["digest"][1] - bare_c) / bare_c
    same = (med["digest"][1] - med["reader"][1]) / med["reader"][1]
    print(f"  digest costs {cost * 100:+.1f} % of the bare check(), {same * 100:+.1f} % of the bare check through the "
          f"same reader   target < 5 %   {'MET' if max(cost, same) < 0.05 else 'NOT MET'}")


if __name__ == "__main__":
    main()
