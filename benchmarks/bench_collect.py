"""What years of bundles cost a session's collection, run by hand.

    python benchmarks/bench_collect.py [--bundles 0,10000,100000] [--runs 5]

A project of one test file whose rootdir holds the default bundle folder (``trt-bundles``) with N bundles' files as
a session leaves them (the bundle, its sidecar and its two attestations: 4 files per bundle, empty here: collection
reads names, not bytes) and an engine cache (``.trt_cache``) with N entries' folders.  For each N, in fresh
processes, alternating: ``pytest -q`` with the plugin, and without it (``-p no:trt``: what pytest alone does with
the folder).  Prints the median CPU seconds (user + system) of each and, for the plugin, the growth against N = 0.
Target: collection does not grow with the evidence (growth at the largest N <= 1.1).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".tar.gz", ".tar.gz.intoto.jsonl", ".tar.gz.cdx.json")


def fill(folder: Path, start: int, stop: int) -> None:
    """Bundles ``start``..``stop`` in ``folder/trt-bundles`` and as many cache entries in ``folder/.trt_cache``."""
    bundles, cache = folder / "trt-bundles", folder / ".trt_cache"
    for i in range(start, stop):
        name = f"m{i}-v1.0.0-rtx1.7-cpu-aot"
        for suffix in SUFFIXES:
            os.close(os.open(bundles / f"{name}{suffix}", os.O_CREAT | os.O_WRONLY, 0o644))
        os.close(os.open(bundles / f".{name}.tar.gz.state.json", os.O_CREAT | os.O_WRONLY, 0o644))
        (cache / f"{i % 256:02x}" / f"{i:064x}").mkdir(parents=True)


def cpu_of(folder: Path, *extra: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *extra], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or "1 passed" not in proc.stdout:
        sys.exit(f"pytest failed in {folder}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundles", default="0,10000,100000")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    counts = sorted(int(n) for n in args.bundles.split(","))
    load = [os.getloadavg()[0]]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_collect_") as tmp:
        folder = Path(tmp)
        (folder / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
        (folder / "test_a.py").write_text("def test_a():\n    pass\n")
        (folder / "trt-bundles").mkdir()
        (folder / ".trt_cache").mkdir()
        made = 0
        for count in counts:
            fill(folder, made, count)
            made = count
            sides: dict[str, list[float]] = {"plugin": [], "without": []}
            for r in range(args.runs):
                order = [("plugin", ()), ("without", ("-p", "no:trt"))]
                for name, extra in order[r % 2:] + order[:r % 2]:
                    sides[name].append(cpu_of(folder, *extra))
            results[count] = {name: statistics.median(v) for name, v in sides.items()}
        shutil.rmtree(folder / "trt-bundles")
    load.append(os.getloadavg()[0])
    print(f"collection of 1 test beside N bundles ({len(SUFFIXES) + 1} files each) and N cache entries, "
          f"{args.runs} runs each (median CPU seconds); 1-min load {load[0]:.1f} -> {load[1]:.1f}")
    base = results[counts[0]]["plugin"]
    for count in counts:
        plugin, without = results[count]["plugin"], results[count]["without"]
        print(f"  N = {count:7,}: plugin {plugin:6.3f} s (growth {plugin / base:5.2f}x)   without it {without:6.3f} s")
    growth = results[counts[-1]]["plugin"] / base
    print(f"growth at N = {counts[-1]:,}: {growth:.2f}x   target <= 1.1   {'MET' if growth <= 1.1 else 'NOT MET'}")


if __name__ == "__main__":
    main()
