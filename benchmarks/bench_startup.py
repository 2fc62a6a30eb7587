"""What pytest-trt adds to a pytest run whose tests use no trt marker, run by hand.

    python benchmarks/bench_startup.py [--runs 21] [--bytecode env|on|off]

Runs ``python -m pytest -q -p no:cacheprovider test_plain.py`` (one trivial
test) in fresh subprocesses, alternating with and without the plugin
(``-p no:trt``), and prints the medians, their ratio and difference, and the
fastest run of each side (the least disturbed on a shared, loaded machine).
Target: the plugin adds <= 20 ms.  Also lists the pytest_trt modules and heavy libraries a
plain run imports (from ``-X importtime``).  ``--bytecode`` says whether the
subprocesses may use and write ``__pycache__`` (``on``, what most users have),
must compile every module from source (``off``: no bytecode written, and an
empty ``PYTHONPYCACHEPREFIX`` so that none is read either) or inherit this
shell's setting (``env``); the mode is printed with the result.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("onnx", "onnxruntime", "tensorrt", "tensorrt_rtx", "h5py", "numpy", "matplotlib", "mlflow", "torch")


ENV = dict(os.environ)


def run(folder: Path, *extra: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one pytest process; CPU time is less disturbed by a loaded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_plain.py"],
                   cwd=folder, check=True, capture_output=True, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported(folder: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_plain.py"], cwd=folder, capture_output=True, text=True, check=True, env=ENV)
    names = [m.group(1) for m in re.finditer(r"\|\s*(\S+)\s*$", proc.stderr, re.M)]
    return [n for n in names if n.startswith("pytest_trt") or n.split(".")[0] in HEAVY and "." not in n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--bytecode", choices=("env", "on", "off"), default="env")
    args = ap.parse_args()
    if args.bytecode == "on":
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        folder = Path(tmp)
        if args.bytecode == "off":
            ENV["PYTHONDONTWRITEBYTECODE"] = "1"
            ENV["PYTHONPYCACHEPREFIX"] = str(folder / "no-pycache")  # empty: nothing cached is read
        if args.bytecode == "off":
            mode = "off (every module compiled from source)"
        elif "PYTHONDONTWRITEBYTECODE" in ENV:
            mode = "env: PYTHONDONTWRITEBYTECODE set (existing __pycache__ read, none written)"
        else:
            mode = "on (__pycache__ read and written)"
        print(f"bytecode cache: {mode}")
        (folder / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
        run(folder)
        run(folder, "-p", "no:trt")  # warm the file cache for both sides
        with_plugin, without = [], []
        for _ in range(args.runs):
            with_plugin.append(run(folder))
            without.append(run(folder, "-p", "no:trt"))
        for i, what in enumerate(("wall", "CPU")):
            a = statistics.median(r[i] for r in with_plugin)
            b = statistics.median(r[i] for r in without)
            added = (a - b) * 1e3
            print(f"{what:4s}: with pytest-trt {a * 1e3:.0f} ms, with -p no:trt {b * 1e3:.0f} ms "
                  f"(medians of {args.runs}, alternating): ratio {a / b:.3f}, added {added:.1f} ms   "
                  f"target <= 20 ms   {'MET' if added <= 20 else 'NOT MET'}")
            # on a loaded machine the fastest run of each side is the least disturbed one
            lo_a, lo_b = min(r[i] for r in with_plugin), min(r[i] for r in without)
            print(f"      fastest of each: {lo_a * 1e3:.0f} vs {lo_b * 1e3:.0f} ms: ratio {lo_a / lo_b:.3f}, "
                  f"added {(lo_a - lo_b) * 1e3:.1f} ms   target <= 20 ms")
        mods = imported(folder)
        print(f"modules a plain run imports: {len([m for m in mods if m.startswith('pytest_trt')])} pytest_trt "
              f"modules; heavy libraries: {', '.join(m for m in mods if not m.startswith('pytest_trt')) or 'none'}")
        print("  " + " ".join(m for m in mods if m.startswith("pytest_trt")))


if __name__ == "__main__":
    main()
