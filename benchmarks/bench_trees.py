"""Two installs of pytest-trt side by side (e.g. before and after a refactor), through public entry points only.

Each round runs the same pytest suites and CLI command with interpreter A then B (the order alternates every
round) and prints the median wall time of each and the ratio B/A next to the target (<= 1.00: no slowdown).
Only what users run is timed, so the two trees may differ in every internal name:

* build:       ``pytest --trt-engine-build --trt-rebuild --trt-backend tensorrt-rtx``, 5 tests over 2 configs
               (the example MobileNetV2 and the 224x224 one of benchmarks/models.py, 14.7 MB engine)
* cache hit:   the same suite without ``--trt-rebuild`` (engines and bundles from the previous run)
* golden:      ``trt_golden.check`` on ONNX Runtime, 2,048 samples of 1,000-class logits (golden approved once
               per interpreter before timing)
* log parse:   ``pytest-trt log parse`` of a 100 MB TensorRT verbose log (written by bench_logparse's generator)

Usage: ``python benchmarks/bench_trees.py /path/to/venvA/bin/python /path/to/venvB/bin/python [--rounds 5]``.
Each interpreter must import its own pytest_trt (check with ``-c 'import pytest_trt; print(pytest_trt.__file__)'``)
and have tensorrt-rtx and onnxruntime installed.  Bytecode is written (as a pip install does), so the warm-up
compiles each tree once and the timed runs measure running, not compiling.  The temporary folder is removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

HERE = __file__.rsplit("/", 1)[0]
SMALL = BuildConfig(name="example_mnv2", onnx=HERE + "/small.onnx",
                    profiles=[Profile(input=((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)))])
BIG = BuildConfig(name="mnv2_224", onnx=HERE + "/big.onnx",
                  profiles=[Profile(input=((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224)))])

@pytest.mark.parametrize("i", range(3))
@pytest.mark.trt(SMALL)
def test_small(trt_engine, i):
    assert trt_engine.record.layers

@pytest.mark.parametrize("i", range(2))
@pytest.mark.trt(BIG)
def test_big(trt_engine, i):
    assert trt_engine.record.layers
"""

GOLDEN = """
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset, Profile

HERE = __file__.rsplit("/", 1)[0]
HEAD = BuildConfig(name="head", onnx=HERE + "/head.onnx",
                   profiles=[Profile(x=((1, 256), (256, 256), (256, 256)))])
DATA = GoldenDataset.from_arrays({"x": np.random.default_rng(0).standard_normal((2048, 256), dtype=np.float32)})

@pytest.mark.trt(HEAD)
def test_head(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATA, l2_delta=0.05)
"""


def head_model(path: Path) -> None:
    """A 256 -> 1000 Gemm: cheap to run, so the check's own work (1,000-class statistics) dominates."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((256, 1000), dtype=np.float32) * 0.05, "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["logits"], name="fc")], "head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def run(cmd: list[str], cwd: Path) -> float:
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package runs: modules compiled once, not every run
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} (in {cwd}) failed with {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                         f"{proc.stderr[-3000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("python_a", help="interpreter of the first install (e.g. before)")
    ap.add_argument("python_b", help="interpreter of the second install (e.g. after)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log-mb", type=float, default=100.0)
    args = ap.parse_args()

    from benchmarks.bench_logparse import make_log
    from benchmarks.models import write as write_big
    from examples.models import mobilenet_v2, save

    work = Path(tempfile.mkdtemp(prefix="bench_trees_"))
    try:
        pythons = {"A": args.python_a, "B": args.python_b}
        dirs: dict[str, Path] = {}
        for tag in pythons:
            d = dirs[tag] = work / tag
            d.mkdir()
            save(mobilenet_v2(), d / "small.onnx")
            write_big(d / "big.onnx")
            head_model(d / "head.onnx")
            (d / "test_suite.py").write_text(textwrap.dedent(SUITE))
            (d / "test_golden.py").write_text(textwrap.dedent(GOLDEN))
            (d / "pytest.ini").write_text("[pytest]\n")
        log = work / "big.log"
        make_log(log, args.log_mb)

        def suite(tag: str, *extra: str) -> list[str]:
            return [pythons[tag], "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py",
                    "--trt-backend", "tensorrt-rtx", *extra]

        def golden(tag: str, *extra: str) -> list[str]:
            return [pythons[tag], "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_golden.py",
                    "--trt-backend", "onnxruntime", "--trt-engine-build", *extra]

        def logparse(tag: str) -> list[str]:
            cli = str(Path(pythons[tag]).with_name("pytest-trt"))
            return [cli, "log", "parse", str(log)]

        for tag in pythons:  # warm: engines, bundles, goldens, byte-compiled modules
            run(suite(tag, "--trt-engine-build"), dirs[tag])
            run(golden(tag, "--trt-update-golden", "--trt-approve", "bench"), dirs[tag])
            run(golden(tag), dirs[tag])

        cases = {
            "build (2 engines, 5 tests)": lambda t: suite(t, "--trt-engine-build", "--trt-rebuild"),
            "cache hit (same suite)": lambda t: suite(t),
            "golden check (2,048 x 1,000 logits)": lambda t: golden(t),
            f"log parse ({args.log_mb:g} MB)": logparse,
        }
        times: dict[str, dict[str, list[float]]] = {c: {"A": [], "B": []} for c in cases}
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for case, make in cases.items():
                for tag in order:
                    times[case][tag].append(run(make(tag), dirs[tag]))
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

        print(f"A = {args.python_a}\nB = {args.python_b}")
        print(f"{args.rounds} rounds, order alternating; medians of wall time")
        print(f"{'case':40s} {'A s':>8s} {'B s':>8s} {'B/A':>7s}  target")
        for case in cases:
            a, b = statistics.median(times[case]["A"]), statistics.median(times[case]["B"])
            over = "" if b / a <= 1.0 else "  (over)"
            print(f"{case:40s} {a:8.3f} {b:8.3f} {b / a:7.3f}  <= 1.00 (no slowdown){over}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
