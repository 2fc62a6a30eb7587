"""Build through pytest-trt vs a bare TensorRT build, and cache-hit latency (run by hand).

    python benchmarks/bench_build.py [--runs 15] [--module tensorrt_rtx]

1. Cache-miss build of the example MobileNetV2 through the plugin's provider
   (VERBOSE capture, DETAILED verbosity, read-back, artifact write) against a
   bare ``build_serialized_network`` with a WARNING-level logger, same process,
   alternating runs.  Target: ratio of medians <= 1.10.
2. Cache hit (key, lock, hash check of every file, load): target <= 50 ms median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.models import write_all  # noqa: E402
from pytest_trt import BuildConfig, Profile  # noqa: E402
from pytest_trt.backends.tensorrt import TensorRTBackend  # noqa: E402
from pytest_trt.session import EngineProvider  # noqa: E402

SHAPES = ((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))


def bare_build(trt, onnx: Path) -> float:
    logger = trt.Logger(trt.Logger.WARNING)
    t0 = time.perf_counter()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse_from_file(str(onnx))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("input", *SHAPES)
    config.add_optimization_profile(profile)
    assert builder.build_serialized_network(network, config) is not None
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--module", default="tensorrt_rtx")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_build_"))
    onnx = write_all(work / "models")["mobilenet_v2"]
    backend = TensorRTBackend(args.module)
    trt = backend.trt
    config = BuildConfig(name="mobilenet_v2", onnx=onnx, profiles=[Profile(input=SHAPES)])
    bare_build(trt, onnx)  # warm-up both paths
    EngineProvider(backend.name, cache_dir=work / "warm", build=True, backend=backend).get(config)
    plugin_s, bare_s = [], []
    for i in range(args.runs):
        t0 = time.perf_counter()
        EngineProvider(backend.name, cache_dir=work / f"miss{i}", build=True, backend=backend).get(config)
        plugin_s.append(time.perf_counter() - t0)
        bare_s.append(bare_build(trt, onnx))
    hit_s = []
    for _ in range(args.runs * 2):
        t0 = time.perf_counter()
        engine = EngineProvider(backend.name, cache_dir=work / "miss0", build=False, backend=backend).get(config)
        hit_s.append(time.perf_counter() - t0)
        assert engine.cached
    mp, mb, mh = (statistics.median(x) for x in (plugin_s, bare_s, hit_s))
    print(f"{backend.name} {backend.version()}, MobileNetV2-style example, {args.runs} alternating runs")
    print(f"cache-miss build through pytest-trt: median {mp * 1000:.1f} ms")
    print(f"bare build_serialized_network (WARNING logger): median {mb * 1000:.1f} ms")
    print(f"ratio of medians plugin/bare: {mp / mb:.3f} (target <= 1.10)")
    print(f"cache hit (key, lock, hash check, load): median {mh * 1000:.1f} ms (target <= 50 ms)")


if __name__ == "__main__":
    main()
