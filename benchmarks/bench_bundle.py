"""Audit bundle cost against its cache-miss build, both through the product path (run by hand).

    PYTHONPATH=. python benchmarks/bench_bundle.py [--rounds 7] [--model mnv2_224|resnet50|example]
                                                   [--folder-bundles N]

Builds the torchvision-size MobileNetV2 of ``benchmarks/models.py`` (224x224,
batch 1/4/8, a 14.7 MB engine; ``--model resnet50``: its ResNet-50, a ~100 MB engine;
``--model example``: the example MobileNetV2, 32x32, batch 1/8/32) and times, alternating in each round:

* cache miss: what ``--trt-engine-build --trt-rebuild`` runs for one engine, ``EngineProvider.get``
  (build, VERBOSE capture) plus ``flush()`` (the cache entry written);
* record: the BuildRecord parsed from the captured log (the bundle and the test report need it);
* bundle: ``BundleRecorder.bundle`` of the fresh engine, as the audit hook calls it (lock, existing-bundle
  check, members, tar.gz, atomic rename with fsync, sidecar);
* cache hit, first session: ``BundleRecorder.bundle`` of the engine served from the cache, a new
  recorder (a new pytest session): the bundle's content is built once to compare its manifest;
* cache hit, later sessions: the same again, answered by the sidecar's inputs digest (nothing built);
* environment: capturing environment.json (once per session, not per bundle);
* floor: what any bundle holding the engine costs at least, the engine's bytes hashed (sha256, as the
  bundle's own hash needs) and written once more through ``fileio.write_bytes_atomic`` (fsync, rename).

``--folder-bundles N``: every round writes into one folder that already holds N other bundles' files (4 each, as
sessions leave them: bundle, sidecar, two attestations; empty), as a folder of years of evidence does; this round's
bundle files are removed after it (untimed), so that each round writes its bundle anew.

Prints medians, the bundle size, bundle / floor (target <= 1.1), bundle / cache miss, and the
1-minute load average before and after.  ``--phases`` also prints where the fresh bundles' time went (probes
around the writer's steps, each a few microseconds; the threads' work is off the critical path
unless the critical path waits for it).  The work folder is removed at exit.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: examples/ is not installed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", choices=("mnv2_224", "resnet50", "example"), default="mnv2_224")
    ap.add_argument("--phases", action="store_true", help="also print the fresh bundles' time per step")
    ap.add_argument("--folder-bundles", type=int, default=0, metavar="N",
                    help="write into one folder holding N other bundles' files (see above)")
    args = ap.parse_args()
    phases = _Phases() if args.phases else None

    import os

    from benchmarks.models import bench_config, timed_miss
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.audit.recorder import AuditSettings, BundleRecorder
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.common.fileio import write_bytes_atomic
    from pytest_trt.engines.provider import EngineProvider

    work = Path(tempfile.mkdtemp(prefix="bench_bundle_"))
    try:
        config = bench_config(args.model, work)
        backend = create_backend("tensorrt-rtx")
        backend.build_config(config)  # warm-up: library loading is not part of a build
        load = [os.getloadavg()[0]]

        t = time.perf_counter()
        env = capture_environment(backend=backend.name, rootdir=Path.cwd())
        env_s = time.perf_counter() - t
        times: dict[str, list[float]] = {k: [] for k in ("miss", "record", "bundle", "hit1", "hit", "floor")}
        size = 0
        for i in range(args.rounds):
            engine, miss_s = timed_miss(backend, config, work / "cache")
            times["miss"].append(miss_s)
            t = time.perf_counter()
            engine.record  # noqa: B018 - parsed once, kept by the engine
            times["record"].append(time.perf_counter() - t)
            folder = work / ("bundles" if args.folder_bundles else f"bundles{i}")
            if i == 0 and args.folder_bundles:
                _fill(folder, args.folder_bundles)
            settings = AuditSettings(bundle_dir=folder, rootdir=Path.cwd())
            if phases is not None:
                phases.start()
            t = time.perf_counter()
            info = BundleRecorder(settings, backend=backend.name, _environment=env).bundle(engine)
            times["bundle"].append(time.perf_counter() - t)
            if phases is not None:
                phases.on = False
            size = info.size
            data = engine.result.engine_buffer()  # as the bundle has it: no copy inside either timed region
            t = time.perf_counter()
            hashlib.sha256(data).hexdigest()
            write_bytes_atomic(work / f"floor{i}.bin", data)
            times["floor"].append(time.perf_counter() - t)
            for key in ("hit1", "hit"):  # two later sessions, each a new provider and recorder
                cached = EngineProvider(backend.name, cache_dir=work / "cache", backend=backend).get(config)
                cached.record  # noqa: B018 - the test report needs it either way; not part of the bundle
                t = time.perf_counter()
                again = BundleRecorder(settings, backend=backend.name, _environment=env).bundle(cached)
                times[key].append(time.perf_counter() - t)
                assert again.sha256 == info.sha256, "a cache hit must keep the identical bundle"
            if args.folder_bundles:  # the next round writes its bundle anew, beside the same N others
                for mine in folder.glob(f"*{info.path.name}*"):
                    mine.unlink()
        load.append(os.getloadavg()[0])
        med = {k: statistics.median(v) for k, v in times.items()}
        miss, bun = med["miss"], med["bundle"]
        print(f"{args.model}: engine {len(engine.result.engine):,} bytes, log {len(engine.result.log)} messages, "
              f"{args.rounds} rounds (medians); 1-min load {load[0]:.1f} -> {load[1]:.1f}; the bundle folder "
              f"holds {args.folder_bundles:,} other bundles")
        print(f"cache miss (build + cache write) {miss * 1000:8.1f} ms")
        print(f"record parse                     {med['record'] * 1000:8.1f} ms")
        print(f"bundle write (recorder)          {bun * 1000:8.1f} ms   size {size:,} bytes")
        print(f"cache hit, first session         {med['hit1'] * 1000:8.1f} ms   (content built, manifest compared)")
        print(f"cache hit, later sessions        {med['hit'] * 1000:8.1f} ms   (sidecar inputs digest)")
        print(f"environment capture              {env_s * 1000:8.1f} ms   (once per session)")
        print(f"floor: engine hashed + written   {med['floor'] * 1000:8.1f} ms   "
              f"= {med['floor'] / miss:.1%} of the cache miss")
        print(f"bundle / floor                   {bun / med['floor']:8.3f}   target <= 1.1   "
              f"{'MET' if bun / med['floor'] <= 1.1 else 'NOT MET'}   (per round: "
              f"{', '.join(f'{b / f:.2f}' for b, f in zip(times['bundle'], times['floor'], strict=True))})")
        print(f"bundle / cache miss              {bun / miss:8.1%}")
        print(f"(record + bundle) / cache miss   {(med['record'] + bun) / miss:8.1%}")
        if phases is not None:
            phases.report(times["bundle"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fill(folder: Path, count: int) -> None:
    """``count`` other bundles' files in ``folder`` (empty: listing them costs what the names cost)."""
    import os

    folder.mkdir(parents=True)
    for i in range(count):
        name = f"other{i}-v1.0.0-rtx1.7-cpu-aot.tar.gz"
        for file in (name, f"{name}.intoto.jsonl", f"{name}.cdx.json", f".{name}.state.json"):
            os.close(os.open(folder / file, os.O_CREAT | os.O_WRONLY, 0o644))


class _Phases:
    """Probes around the bundle writer's steps (``--phases``), counted while ``on`` (the fresh bundles only)."""

    STEPS = (  # (module, attribute, label); the order of a bundle's critical path
        ("pytest_trt.common.fileio", "acquire_lock", "lock (recorder)"),
        ("pytest_trt.audit.bundle", "bundle_members", "members (JSON; waits for the log's gzip)"),
        ("pytest_trt.audit.archive", "write_tar_gz", "archive gathered (deflate of the small members)"),
        ("pytest_trt.audit.gathered", "write_buffers", "os.writev (copy into the page cache, writeback started)"),
        ("os", "fsync", "fsync (the disk: the file, then its folder)"),
        ("pytest_trt.audit.sidecar", "write_state", "sidecar"),
    )
    THREADS = (
        ("pytest_trt.audit.archive", "gzip_bytes", "log gzip (prep thread; in line for engines under 1 MiB)"),
        ("pytest_trt.audit.gathered", "sha256_of", "file sha256 (its thread)"),
    )

    def __init__(self) -> None:
        import importlib

        self.on = False
        self.bundles = 0  # fresh bundles begun (start())
        self.bundle_no: dict[str, int] = {}
        self.times: dict[str, list[float]] = {}
        for module, name, label in self.STEPS + self.THREADS:
            mod = importlib.import_module(module)
            setattr(mod, name, self._probe(getattr(mod, name), label))

    def _probe(self, fn: Any, label: str) -> Any:
        def probe(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.on:  # summed per bundle: os.fsync runs twice (the file, then its folder after the rename)
                    self.times.setdefault(label, []).append(time.perf_counter() - t)
                    if self.bundle_no.get(label) == self.bundles:
                        self.times[label][-2:] = [sum(self.times[label][-2:])]
                    self.bundle_no[label] = self.bundles

        return probe

    def start(self) -> None:
        """A fresh bundle begins: its probes are counted from here on (and summed)."""
        self.bundles += 1
        self.on = True

    def report(self, bundles: list[float]) -> None:
        print("fresh bundle, per step (medians; the threads run beside the critical path):")
        rounds = []
        for _, _, step in self.STEPS:
            values = self.times.get(step, [])
            print(f"  {step:62s} {statistics.median(values) * 1000 if values else 0.0:6.2f} ms")
            rounds.append(values)
        if all(len(values) == len(bundles) for values in rounds):  # one call per bundle: the rest, round by round
            other = [total - sum(step[i] for step in rounds) for i, total in enumerate(bundles)]
            label = "other (recorder, threads started, temp file, rename, waits)"
            print(f"  {label:62s} {statistics.median(other) * 1000:6.2f} ms")
        for _, _, work in self.THREADS:
            values = self.times.get(work, [])
            print(f"  {work:62s} {statistics.median(values) * 1000 if values else 0.0:6.2f} ms")


if __name__ == "__main__":
    main()
