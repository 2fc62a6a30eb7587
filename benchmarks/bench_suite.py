"""A 50-test suite over 10 engine configs, from the engine cache, with and without pytest-trt (run by hand).

    python benchmarks/bench_suite.py [--rounds 5] [--no-bytecode-cache] [--compare CHECKOUT]

A temporary project holds 10 MobileNetV2-style ONNX models (the example
generator, seeds 0..9).  A first run with ``--trt-engine-build`` fills the
engine cache (and writes the audit bundles); one untimed cache-hit run follows
(the first session after a build compares each bundle's manifest once and
records its inputs digest, see ``pytest_trt.audit.sidecar``, and keeps the installed
distributions' versions beside the bundles, see ``pytest_trt.audit.environment``).  Then, alternating,
in fresh pytest processes:

* with the plugin: 50 tests, 5 per config, each marked ``@pytest.mark.trt(config)``
  and using ``trt_engine`` (cache hit, record, audit bundle per engine);
* without it (``-p no:trt``): the same 50 tests, each reading its engine's
  bytes from a copy of the cached ``engine.plan``, as a suite without the
  plugin would load prebuilt engines.

Both sides run with Python's bytecode cache on (``PYTHONDONTWRITEBYTECODE`` removed from the
children's environment), as an installed plugin runs: pip compiles a package on install and pytest
caches its assertion-rewritten modules.  With the variable set (this sandbox sets it), every
session recompiles the plugin's modules from source, which the side without the plugin never
does; ``--no-bytecode-cache`` keeps the variable, to measure that case.

``--compare CHECKOUT`` adds a third contender in the same rounds: the plugin imported from
another checkout (for example ``git archive`` of the commit before a change), so a before/after
pair is measured side by side rather than in two runs on a machine whose load changes.

Target: median(with) / median(without) <= 1.15.  The folder is removed at exit.
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS, TESTS_PER_CONFIG = 10, 5

CONFTEST = '''
from pathlib import Path
from pytest_trt import BuildConfig, Profile

HERE = Path(__file__).parent
CONFIGS = [BuildConfig(name=f"m{i}", version="1.0.0", onnx=HERE / "models" / f"m{i}.onnx",
                       profiles=[Profile(input=((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)))])
           for i in range({n})]
'''

WITH = '''
import pytest
from conftest import CONFIGS

@pytest.mark.parametrize("k", range({k}))
@pytest.mark.trt(CONFIGS[{i}])
def test_m{i}(trt_engine, k):
    assert trt_engine.result.engine and trt_engine.config.name == "m{i}"
'''

WITHOUT = '''
import pytest
from pathlib import Path

@pytest.mark.parametrize("k", range({k}))
def test_m{i}(k):
    engine = (Path(__file__).parent / "plans" / "m{i}.plan").read_bytes()
    assert engine
'''


def make_project(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from examples.models import mobilenet_v2, save

    (folder / "with").mkdir(parents=True)
    (folder / "without").mkdir()
    for i in range(CONFIGS):
        save(mobilenet_v2(seed=i), folder / "with" / "models" / f"m{i}.onnx")
        (folder / "with" / f"test_m{i}.py").write_text(WITH.format(i=i, k=TESTS_PER_CONFIG))
        (folder / "without" / f"test_m{i}.py").write_text(WITHOUT.format(i=i, k=TESTS_PER_CONFIG))
    (folder / "with" / "conftest.py").write_text(CONFTEST.replace("{n}", str(CONFIGS)))
    for side in ("with", "without"):
        (folder / side / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")


CPU: list[float] = []  # CPU seconds (user + system) of each pytest_run, in call order
ENV = dict(os.environ)  # the children's environment (main() decides on the bytecode cache)


def pytest_run(folder: Path, *args: str, env: dict[str, str] | None = None) -> float:
    """Wall seconds of one pytest process; its CPU seconds are appended to :data:`CPU`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=folder, capture_output=True, text=True,
                          env=ENV if env is None else env)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if proc.returncode != 0 or f"{CONFIGS * TESTS_PER_CONFIG} passed" not in proc.stdout:
        sys.exit(f"pytest in {folder} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", default="tensorrt-rtx")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE from the environment (every session recompiles the plugin)")
    ap.add_argument("--compare", type=Path, metavar="CHECKOUT",
                    help="a third contender: the same suite with the plugin imported from another checkout "
                         "(PYTHONPATH=CHECKOUT), e.g. the commit before a change, timed in the same rounds")
    args = ap.parse_args()
    if not args.no_bytecode_cache:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"bytecode cache: {'off (PYTHONDONTWRITEBYTECODE)' if ENV.get('PYTHONDONTWRITEBYTECODE') else 'on'}")
    with tempfile.TemporaryDirectory(prefix="bench_suite_") as tmp:
        folder = Path(tmp)
        make_project(folder)
        t = pytest_run(folder / "with", "--trt-engine-build", f"--trt-backend={args.backend}")
        print(f"cache filled: {CONFIGS} engines built in one run of {CONFIGS * TESTS_PER_CONFIG} tests, {t:.1f} s")
        t = pytest_run(folder / "with", f"--trt-backend={args.backend}")
        print(f"first cache-hit run (bundle manifests compared once, inputs digests recorded): {t:.2f} s")
        (folder / "without" / "plans").mkdir()
        for i, plan in enumerate(sorted((folder / "with" / ".trt_cache").rglob("engine.plan"))):
            shutil.copyfile(plan, folder / "without" / "plans" / f"m{i}.plan")
        with_s, without_s, with_cpu, without_cpu = [], [], [], []
        other_s, other_cpu = [], []
        other_env = None if args.compare is None else {**ENV, "PYTHONPATH": str(args.compare.resolve())}
        for r in range(args.rounds):
            sides = [("with", lambda: pytest_run(folder / "with", f"--trt-backend={args.backend}")),
                     ("without", lambda: pytest_run(folder / "without", "-p", "no:trt"))]
            if other_env is not None:
                sides.append(("other", lambda: pytest_run(folder / "with", f"--trt-backend={args.backend}",
                                                          env=other_env)))
            k = r % len(sides)
            for name, run in sides[k:] + sides[:k]:  # each side goes first in turn
                wall = run()
                if name == "other":
                    other_s.append(wall)
                    other_cpu.append(CPU[-1])
                else:
                    (with_s if name == "with" else without_s).append(wall)
                    (with_cpu if name == "with" else without_cpu).append(CPU[-1])
        a, b = statistics.median(with_s), statistics.median(without_s)
        ca, cb = statistics.median(with_cpu), statistics.median(without_cpu)
        n = CONFIGS * TESTS_PER_CONFIG
        print(f"{n} tests over {CONFIGS} configs from cache: with pytest-trt {a:.2f} s, without (-p no:trt) "
              f"{b:.2f} s (medians of {args.rounds}, alternating)")
        print(f"ratio {a / b:.3f}   target <= 1.15   {'MET' if a / b <= 1.15 else 'NOT MET'}   "
              f"(+{(a - b) / n * 1000:.1f} ms per test)")
        print(f"  with: {', '.join(f'{x:.2f}' for x in with_s)}; without: {', '.join(f'{x:.2f}' for x in without_s)}")
        # CPU time is what the plugin costs on a busy machine, where wall time also measures the neighbours
        print(f"CPU time (user + system): with {ca:.2f} s, without {cb:.2f} s: ratio {ca / cb:.3f}   target <= 1.15   "
              f"{'MET' if ca / cb <= 1.15 else 'NOT MET'}   (+{(ca - cb) / n * 1000:.1f} ms per test)")
        if other_s:
            oa, oc = statistics.median(other_s), statistics.median(other_cpu)
            print(f"plugin from {args.compare}, same rounds: {oa:.2f} s, ratio {oa / b:.3f}; "
                  f"CPU {oc:.2f} s, ratio {oc / cb:.3f}   (target <= 1.15)")


if __name__ == "__main__":
    main()
