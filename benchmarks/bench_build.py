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


def bare_build(trt, onnx: Path) -> tuple[float, float]:
    """(whole bare build, its build_serialized_network call) in seconds."""
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
    t1 = time.perf_counter()
    assert builder.build_serialized_network(network, config) is not None
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


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
    plugin_s, bare_s, plugin_bsn, bare_bsn = [], [], [], []
    def plugin_run(i: int) -> None:
        t0 = time.perf_counter()
        provider = EngineProvider(backend.name, cache_dir=work / f"miss{i}", build=True, backend=backend)
        engine = provider.get(config)
        plugin_s.append(time.perf_counter() - t0)  # the test may go on: the cache entry is written behind it
        provider.flush()
        plugin_bsn.append(engine.result.durations["build"])

    def bare_run() -> None:
        whole, bsn = bare_build(trt, onnx)
        bare_s.append(whole)
        bare_bsn.append(bsn)

    for i in range(args.runs):  # alternate which goes first, so neither profits from the other's warm caches
        if i % 2:
            bare_run()
            plugin_run(i)
        else:
            plugin_run(i)
            bare_run()
    hit_s: list[float] = []
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
    ip, ib = statistics.median(plugin_bsn), statistics.median(bare_bsn)
    print(f"  inside build_serialized_network: plugin {ip * 1000:.1f} ms (DETAILED, VERBOSE capture) vs bare "
          f"{ib * 1000:.1f} ms; outside it: plugin {(mp - ip) * 1000:.1f} ms vs bare {(mb - ib) * 1000:.1f} ms")
    print(f"cache hit (key, lock, hash check, load): median {mh * 1000:.1f} ms (target <= 50 ms)")


if __name__ == "__main__":
    main()
