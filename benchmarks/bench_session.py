"""What a cache-hit session adds per config and per test, serial and under ``-n 2`` (run by hand).

    PYTHONPATH=. python benchmarks/bench_session.py [--model mnv2_224|example] [--rounds 3]
                                                    [--dist load,loadgroup] [--compare CHECKOUT]

A temporary project holds ``max(--configs)`` configs, each its own copy of one ONNX model (the torchvision-size
MobileNetV2 of ``benchmarks/models.py``, a 14 MB file: every config's ONNX is a file of its own to hash) with
its own engine (maximum batch 8 + i).  One session with ``--trt-engine-build`` fills the cache, then an untimed
cache-hit session of each kind (the bundles' sidecars, and the ONNX and engine stamps, see
``pytest_trt.common.filehash.read_stamp``, are written once).  Then, alternating, in fresh pytest processes, for
every shape (C configs, T tests per config), serial and with ``-n 2 --dist D`` for each D of ``--dist``:

* with the plugin: the C x T tests, each marked ``@pytest.mark.trt(config)`` and using ``trt_engine``;
* without it (``-p no:trt``): the same tests, each config's engine read once (a module fixture) from a copy of
  the cached plan, as a suite without the plugin loads its prebuilt engines.

A shape's C test modules are in a folder of their own (``c<C>``), the one path pytest is given.

The CPU time (user + system, workers included) the plugin adds is fitted as ``fixed + a * C + b * C * T`` over the
shapes. Prints a against 5 ms per config and b against 1 ms per test, serial and ``-n 2``, and each ``-n 2`` slope
against the serial one (target: no more), with the 1-minute load average; then the same difference fitted round by
round (median and range): a median above 0 is a breach only when more rounds are above 0 than chance would give (a
one-sided sign test, p < 0.05), else "not shown"; and, for each number of tests per config, the same difference without
the fit: the added CPU from the fewest to the most configs, round by round. The runs of a round go in a shuffled order
(a fixed seed). Under ``--dist load`` a config whose tests land in both workers is loaded by both; under ``--dist
loadgroup`` pytest-trt schedules each config's tests to one worker. ``--compare CHECKOUT``: the plugin imported from
another checkout, in the same rounds (a before/after pair). Every run's pytest temporary folders are made in the
benchmark's own folder (``PYTEST_DEBUG_TEMPROOT``): an xdist controller makes one for its workers and removes old ones
at the end, which would otherwise be other processes' (any size: a random cost).

``--pin CPU``: every pytest process runs on that one CPU (``taskset``), so an ``-n 2`` worker never runs beside the
other one: what stays of ``-n 2`` minus serial is then the work ``-n 2`` adds and the switching between its processes,
not two CPUs slowing each other. ``--work``: after the rounds, three runs of each side, mode and shape count the Python
function calls of every process (a profile hook that counts; ``sys.setprofile``), split into collection and the rest,
and prints the calls the plugin adds per config, serial and ``-n 2``: a count, free of the timing noise, of the work
``-n 2`` adds (both workers collect every test module; the reports and each worker's closing document cross to the
controller). Then how much longer the same pure-Python loop takes beside a second busy process than alone (CPU
seconds, median of 5): the same calls cost more CPU in two workers at once than in one process on a machine where that
number is above 1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = '''
from pathlib import Path
from pytest_trt import BuildConfig, Profile

HERE = Path(__file__).parent
HW = {hw}
CONFIGS = [BuildConfig(name=f"m{{i}}", version="1.0.0", onnx=HERE / "models" / f"m{{i}}.onnx",
                       profiles=[Profile(input=((1, 3, HW, HW), (4, 3, HW, HW), (8 + i, 3, HW, HW)))])
           for i in range({n})]
'''

WITH = '''
import os
import pytest
from conftest import CONFIGS

@pytest.mark.parametrize("k", range(int(os.environ["BENCH_TESTS"])))
@pytest.mark.trt(CONFIGS[{i}])
def test_m{i}(trt_engine, k):
    assert trt_engine.result.engine
'''

WITHOUT = '''
import os
import pytest
from pathlib import Path

@pytest.fixture(scope="module")
def engine():
    return (Path(__file__).parents[1] / "plans" / "m{i}.plan").read_bytes()

@pytest.mark.parametrize("k", range(int(os.environ["BENCH_TESTS"])))
def test_m{i}(engine, k):
    assert engine
'''

#: ``taskset -c CPU`` before each pytest run under ``--pin CPU`` (set by main)
PIN: list[str] = []

CALLS_PLUGIN = '''
"""Counts this pytest process's Python function calls (bench_session.py --work): in all, and during collection."""
import atexit, json, os, sys, threading
import pytest

_calls = [0]
_marks = {}


def _count(frame, event, arg):
    if event == "call":
        _calls[0] += 1


sys.setprofile(_count)
threading.setprofile(_count)


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    _marks["collect"] = _calls[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    _marks["collected"] = _calls[0]


@atexit.register
def _write():
    with open(os.environ["BENCH_CALLS_OUT"], "a") as fh:
        fh.write(json.dumps({"worker": os.environ.get("PYTEST_XDIST_WORKER"), "all": _calls[0], **_marks}) + "\\n")
'''

CORUN_LOOP = ("import sys, time\nend = time.time() + float(sys.argv[1])\n"
              "while time.time() < end:\n    sum(i * i for i in range(10000))")


def make_project(folder: Path, shapes: list[int], model: str) -> None:
    """The project of each side; the test modules of C configs in folder ``c<C>`` (see :func:`run_pytest`)."""
    configs = max(shapes)
    sys.path.insert(0, str(ROOT))
    from examples.models import mobilenet_v2, save

    (folder / "with" / "models").mkdir(parents=True)
    if model == "mnv2_224":
        from benchmarks.models import mobilenet_v2_224

        first, hw = save(mobilenet_v2_224(), folder / "with" / "models" / "m0.onnx"), 224
    else:
        first, hw = save(mobilenet_v2(), folder / "with" / "models" / "m0.onnx"), 32
    for i in range(1, configs):
        shutil.copyfile(first, folder / "with" / "models" / f"m{i}.onnx")
    for c in shapes:
        for side, template in (("with", WITH), ("without", WITHOUT)):
            (folder / side / f"c{c}").mkdir(parents=True)
            for i in range(c):
                (folder / side / f"c{c}" / f"test_m{i}.py").write_text(template.format(i=i))
    (folder / "with" / "conftest.py").write_text(CONFTEST.format(n=configs, hw=hw))
    for side in ("with", "without"):
        (folder / side / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")


def run_pytest(folder: Path, configs: int, tests: int, args: tuple[str, ...], env: dict[str, str]) -> None:
    """One pytest process (under ``--pin``'s CPU) over the first ``configs``, given as their folder (as a suite is
    run: one path per module would have pytest list the rootdir, where the engine cache and the bundles are, once
    per path); exits the benchmark unless every test passed."""
    proc = subprocess.run([*PIN, sys.executable, "-m", "pytest", "-q", f"c{configs}", *args], cwd=folder,
                          capture_output=True, text=True, env={**env, "BENCH_TESTS": str(tests)})
    if proc.returncode != 0 or f"{configs * tests} passed" not in proc.stdout:
        sys.exit(f"pytest in {folder} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")


def pytest_cpu(folder: Path, configs: int, tests: int, *args: str, env: dict[str, str]) -> float:
    """CPU seconds (user + system, the xdist workers included) of one pytest process over the first ``configs``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run_pytest(folder, configs, tests, args, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def pytest_calls(folder: Path, configs: int, tests: int, *args: str, env: dict[str, str]) -> dict[str, int]:
    """Python function calls of one pytest run over the first ``configs``, every process: ``all``, ``collection``
    (from ``pytest_collection`` to ``pytest_collection_finish``) and ``controller`` (the xdist controller's, or 0)."""
    out = folder.parent / "calls.jsonl"
    out.unlink(missing_ok=True)
    run_pytest(folder, configs, tests, ("-p", "bench_calls", *args),
               {**env, "BENCH_CALLS_OUT": str(out),
                "PYTHONPATH": f"{env['PYTHONPATH']}{os.pathsep}{folder.parent / 'plugins'}"})
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    xdist = any(row["worker"] for row in rows)
    collecting = [row for row in rows if row["worker"] or not xdist]  # an xdist controller collects nothing
    return {"all": sum(row["all"] for row in rows),
            "collection": sum(row.get("collected", 0) - row.get("collect", 0) for row in collecting),
            "controller": sum(row["all"] for row in rows if xdist and not row["worker"])}


def count_work(folder: Path, sides: list[tuple[str, Path, tuple[str, ...], dict[str, str]]],
               modes: dict[str, tuple[str, ...]], configs: list[int], tests: list[int]) -> dict[tuple[str, ...], float]:
    """Per (side, mode, tests per config): the Python calls the side adds per config over the plugin-less side,
    from the fewest to the most configs, in all and by part (see :func:`pytest_calls`); each run counted 3 times,
    the median taken (a run now and then makes a few thousand calls more, once)."""
    (folder / "plugins").mkdir(exist_ok=True)
    (folder / "plugins" / "bench_calls.py").write_text(CALLS_PLUGIN)
    lo, hi = min(configs), max(configs)
    counts: dict[tuple[str, str, int, int], dict[str, float]] = {}
    for name, where, extra, side_env in sides:
        for mode_name, mode in modes.items():
            for c in (lo, hi):
                for t in tests:
                    runs = [pytest_calls(where, c, t, *extra, *mode, env=side_env) for _ in range(3)]
                    counts[(name, mode_name, c, t)] = {part: statistics.median(run[part] for run in runs)
                                                       for part in runs[0]}

    def plus(name: str, mode_name: str, c: int, t: int, part: str) -> float:
        return counts[(name, mode_name, c, t)][part] - counts[("without", mode_name, c, t)][part]

    return {(name, mode_name, str(t), part): (plus(name, mode_name, hi, t, part) - plus(name, mode_name, lo, t, part))
            / (hi - lo)
            for name, *_ in sides[:-1] for mode_name in modes for t in tests
            for part in ("all", "collection", "controller")}


def corun_slowdown() -> float:
    """CPU seconds of a pure-Python loop beside a second process running the same kind of loop, over alone (medians
    of 5): 1 where the two CPUs do not slow each other."""
    import time

    def loop() -> float:
        start = time.process_time()
        total = 0
        for i in range(2_000_000):
            total += i * i
        return time.process_time() - start

    alone = statistics.median(loop() for _ in range(5))
    busy = subprocess.Popen([sys.executable, "-c", CORUN_LOOP, "20"])
    try:
        time.sleep(0.5)  # the second process is running
        beside = statistics.median(loop() for _ in range(5))
    finally:
        busy.kill()
        busy.wait()
    return beside / alone


def print_work(added: dict[tuple[str, ...], float], names: list[str], modes: list[str], tests: list[int],
               slowdown: float) -> None:
    print("work: Python function calls the plugin adds per config (each run counted 3 times, the median; a count, "
          "not a time)")
    for name in names:
        for t in tests:
            serial = added[(name, "serial", str(t), "all")]
            for mode_name in modes:
                a = added[(name, mode_name, str(t), "all")]
                line = (f"  {name:8} {mode_name:15} {t:3} test(s) per config: {a:7.0f} (collection "
                        f"{added[(name, mode_name, str(t), 'collection')]:.0f}")
                if mode_name != "serial":
                    line += (f", the controller {added[(name, mode_name, str(t), 'controller')]:.0f}; "
                             f"minus serial {a - serial:+.0f}")
                print(line + ")")
    print(f"the same pure-Python loop beside a second busy process: x{slowdown:.2f} its CPU alone")


def fit(points: list[tuple[int, int, float]]) -> tuple[float, float, float]:
    """Least squares ``added = fixed + a * C + b * N`` over (C, N, added) points; (fixed, a, b) in seconds."""
    import numpy as np

    x = np.array([[1.0, c, n] for c, n, _ in points])
    y = np.array([v for _, _, v in points])
    fixed, a, b = np.linalg.lstsq(x, y, rcond=None)[0]
    return float(fixed), float(a), float(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("mnv2_224", "example"), default="mnv2_224")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--configs", default="4,40")
    ap.add_argument("--tests", default="1,10", help="tests per config")
    ap.add_argument("--dist", default="load,loadgroup",
                    help="xdist's --dist for the -n 2 sessions, comma-separated (load, loadgroup)")
    ap.add_argument("--backend", default="tensorrt-rtx")
    ap.add_argument("--compare", type=Path, metavar="CHECKOUT",
                    help="also the plugin imported from another checkout (PYTHONPATH=CHECKOUT), same rounds")
    ap.add_argument("--pin", metavar="CPU", help="run every pytest process (workers included) on this one CPU "
                    "(taskset -c CPU): no second process runs beside it, and the CPU times are less noisy")
    ap.add_argument("--work", action="store_true",
                    help="also count the Python calls the plugin adds per config (see the module docstring)")
    args = ap.parse_args()
    configs = [int(c) for c in args.configs.split(",")]
    if args.pin is not None:
        PIN[:] = ["taskset", "-c", args.pin]
    tests = [int(t) for t in args.tests.split(",")]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as an installed plugin runs
    env["PYTHONPATH"] = str(ROOT)
    plugins = {"plugin": env}
    if args.compare is not None:
        plugins["compare"] = {**env, "PYTHONPATH": str(args.compare.resolve())}
    modes: dict[str, tuple[str, ...]] = {"serial": ()}
    for dist in args.dist.split(","):
        modes[f"-n 2 {dist}"] = ("-n", "2", "--dist", dist)
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="bench_session_") as tmp:
        folder = Path(tmp)
        make_project(folder, configs, args.model)
        # pytest's temporary folders of this benchmark's runs only (see the docstring)
        (folder / "tmproot").mkdir()
        for side_env in (env, *plugins.values()):
            side_env["PYTEST_DEBUG_TEMPROOT"] = str(folder / "tmproot")
        backend = f"--trt-backend={args.backend}"
        pytest_cpu(folder / "with", max(configs), 1, "--trt-engine-build", backend, env=env)
        (folder / "without" / "plans").mkdir()
        for plan in (folder / "with" / ".trt_cache").rglob("engine.plan"):  # each entry's config names it
            name = json.loads((plan.parent / "config.json").read_text())["pinned"]["name"]
            shutil.copyfile(plan, folder / "without" / "plans" / f"{name}.plan")
        for side_env in plugins.values():  # the first hit session of each kind writes sidecars and stamps
            for mode in modes.values():
                pytest_cpu(folder / "with", max(configs), 1, backend, *mode, env=side_env)
        cpu: dict[tuple[str, str, int, int], list[float]] = {}
        shapes = [(c, t) for c in configs for t in tests]
        rng = random.Random(0)
        for r in range(args.rounds):
            runs = [(mode_name, mode, c, t) for mode_name, mode in modes.items() for c, t in shapes]
            rng.shuffle(runs)  # no mode or shape always runs after the same one
            for mode_name, mode, c, t in runs:
                sides = [(name, folder / "with", (backend, *mode), e) for name, e in plugins.items()]
                sides.append(("without", folder / "without", ("-p", "no:trt", *mode), env))
                k = r % len(sides)
                for name, where, extra, side_env in sides[k:] + sides[:k]:  # each side first in turn
                    cpu.setdefault((name, mode_name, c, t), []).append(pytest_cpu(where, c, t, *extra, env=side_env))
        if args.work:
            sides = [(name, folder / "with", (backend,), e) for name, e in plugins.items()]
            work = count_work(folder, [*sides, ("without", folder / "without", ("-p", "no:trt"), env)], modes,
                              configs, tests)
            slowdown = corun_slowdown()
    load.append(os.getloadavg()[0])
    print(f"{args.model}, {args.rounds} rounds (shuffled runs, sides alternating), medians of CPU (user + system); "
          f"1-min load {load[0]:.1f} -> {load[1]:.1f}")
    slopes: dict[tuple[str, str], tuple[float, float, float]] = {}
    for name in plugins:
        for mode_name in modes:
            points = []
            for c, t in shapes:
                with_s = statistics.median(cpu[(name, mode_name, c, t)])
                without_s = statistics.median(cpu[("without", mode_name, c, t)])
                points.append((c, c * t, with_s - without_s))
                print(f"  {name:8} {mode_name:15} C={c:3} T={t:3}: with {with_s:6.2f} s, without {without_s:6.2f} s, "
                      f"added {(with_s - without_s) * 1000:7.0f} ms")
            slopes[(name, mode_name)] = fit(points)
    for (name, mode_name), (fixed, a, b) in slopes.items():
        print(f"{name:8} {mode_name:15}: added = {fixed * 1000:.0f} ms + {a * 1000:.2f} ms x configs + "
              f"{b * 1000:.2f} ms x tests;  per config {a * 1000:.2f} ms (target <= 5: "
              f"{'MET' if a <= 0.005 else 'NOT MET'}), per test {b * 1000:.2f} ms (target <= 1: "
              f"{'MET' if b <= 0.001 else 'NOT MET'})")
    lo, hi = min(configs), max(configs)

    def fewest_to_most(t: int) -> Callable[[Added], float]:  # per config with its t tests, without the fit
        return lambda added: (added(hi, t) - added(lo, t)) / (hi - lo)

    for name in plugins:
        serial = slopes[(name, "serial")][1]
        for mode_name in list(modes)[1:]:
            xdist = slopes[(name, mode_name)][1]
            diffs = round_differences(cpu, name, mode_name, args.rounds,
                                      lambda added: fit([(c, c * t, added(c, t)) for c, t in shapes])[1])
            print(f"{name:8} {mode_name} per-config slope {xdist * 1000:.2f} ms vs serial {serial * 1000:.2f} ms   "
                  f"(target: no more than serial)   {'MET' if xdist <= serial else 'NOT MET'}   "
                  f"1-min load {load[0]:.1f} -> {load[1]:.1f}")
            print(f"{name:8} {mode_name} minus serial, fitted round by round: median {statistics.median(diffs):+.2f} "
                  f"ms per config, {min(diffs):+.2f} .. {max(diffs):+.2f} over {len(diffs)} rounds: "
                  f"{difference_verdict(diffs)}")
            for t in tests:
                per = round_differences(cpu, name, mode_name, args.rounds, fewest_to_most(t))
                print(f"{name:8} {mode_name} minus serial, a config with {t} test(s), round by round: median "
                      f"{statistics.median(per):+.2f} ms, {min(per):+.2f} .. {max(per):+.2f}: "
                      f"{difference_verdict(per)}")
    if args.work:
        print_work(work, list(plugins), list(modes), tests, slowdown)


#: what the plugin added to one run: ``added(configs, tests)``, in CPU seconds
Added = Callable[[int, int], float]


def round_differences(cpu: dict[tuple[str, str, int, int], list[float]], name: str, mode_name: str, rounds: int,
                      per_config: Callable[[Added], float]) -> list[float]:
    """Per round, ``per_config`` of what ``mode_name`` added minus that of what serial added (ms), each taken from
    that round's runs alone: their spread is the noise the medians' comparison cannot show."""
    def added(mode: str, r: int) -> Added:
        return lambda c, t: cpu[(name, mode, c, t)][r] - cpu[("without", mode, c, t)][r]

    return [(per_config(added(mode_name, r)) - per_config(added("serial", r))) * 1000 for r in range(rounds)]


def difference_verdict(diffs: list[float]) -> str:
    """MET when the rounds' median difference is <= 0; NOT MET when more rounds are above 0 than a coin would give
    (one-sided sign test, p < 0.05: the rounds are independent, each side's runs shuffled within its round); else
    not shown.  The verdict names how many rounds were above 0."""
    above, n = sum(d > 0 for d in diffs), sum(d != 0 for d in diffs)
    if statistics.median(diffs) <= 0:
        return f"MET (above 0 in {above} of {len(diffs)} rounds)"
    p = sum(math.comb(n, k) for k in range(above, n + 1)) / 2 ** n
    if p < 0.05:
        return f"NOT MET (above 0 in {above} of {n} rounds: sign test p = {p:.2g})"
    return f"NOT SHOWN (median > 0, above 0 in {above} of {n} rounds: sign test p = {p:.2g})"


if __name__ == "__main__":
    main()
