"""Build through pytest-trt vs a bare TensorRT build, and cache-hit latency (run by hand).

    python benchmarks/bench_build.py [--runs 9] [--module tensorrt_rtx] [--models example,mnv2_224]

For each model, the example MobileNetV2-style net (32x32) and the torchvision-size
MobileNetV2 of ``benchmarks/models.py`` (224x224, 1000 classes, ~14.5 MB engine):

1. Cache-miss build through the plugin's provider (VERBOSE capture, DETAILED
   verbosity, read-back, and the cache write: ``flush()`` is inside the timed
   region) against a bare ``build_serialized_network`` with a WARNING-level
   logger, same process, rotating which goes first.  Target: ratio of
   medians <= 1.05.
   The provider is made as ``--trt-engine-build`` makes it (backend chosen through
   the registry, one per session), so per-session costs are counted.
   A third contender, the bare build with the VERBOSE capture and DETAILED verbosity
   (the evidence pytest-trt exists to keep), shows how much of the ratio is TensorRT
   producing that log, and how much is pytest-trt's own work.
2. Cache hit (key, hash check, load) of the model's engine: target <= 20 ms median,
   in this process and in a fresh process, where it must not import the backend library.

Temporary folders are removed at exit.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.models import write_all  # noqa: E402
from pytest_trt import BuildConfig, Profile  # noqa: E402
from pytest_trt import options as opt  # noqa: E402
from pytest_trt.backends import registry  # noqa: E402
from pytest_trt.engines.provider import EngineProvider  # noqa: E402

SHAPES = ((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))


MNV2_SHAPES = ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))


def bare_build(trt, onnx: Path, shapes=SHAPES, *, evidence: bool = False) -> tuple[float, float]:
    """(whole bare build, its build_serialized_network call) in seconds.

    ``evidence``: the same bare build with what pytest-trt must record, the VERBOSE log captured by
    its logger and DETAILED profiling verbosity (no read-back, no result, no cache): the floor of any
    build that keeps the evidence, which separates TensorRT's own cost of logging from pytest-trt's.
    """
    from pytest_trt.backends.trt_logger import capture_logger

    logger = capture_logger(trt) if evidence else trt.Logger(trt.Logger.WARNING)
    if evidence:
        logger.start()
    t0 = time.perf_counter()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse_from_file(str(onnx))
    config = builder.create_builder_config()
    if evidence:
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = builder.create_optimization_profile()
    profile.set_shape("input", *shapes)
    config.add_optimization_profile(profile)
    t1 = time.perf_counter()
    assert builder.build_serialized_network(network, config) is not None
    t2 = time.perf_counter()
    if evidence:
        logger.stop()  # after the timer: turning messages into log entries is pytest-trt's own work
    return t2 - t0, t2 - t1


def session_provider(backend_name: str, cache_dir: Path, *, build: bool) -> EngineProvider:
    """The provider as the plugin makes it for ``--trt-engine-build`` (plugin._make_provider)."""
    return EngineProvider(backend_name, why="requested with --trt-backend", cache_dir=cache_dir, build=build,
                          build_flag=opt.ENGINE_BUILD, on_progress=lambda text: None)


HIT_SCRIPT = """
import sys, time
t0 = time.perf_counter()
import pytest  # loaded in any pytest session (with importlib.metadata), before an engine is asked for
from pathlib import Path
from pytest_trt import BuildConfig, Profile
from pytest_trt.engines.provider import EngineProvider
t1 = time.perf_counter()
config = BuildConfig(name={name!r}, onnx=Path({onnx!r}), profiles=[Profile(input={shapes!r})])
engine = EngineProvider({backend!r}, cache_dir=Path({cache!r})).get(config)
t2 = time.perf_counter()
assert engine.cached
print(t2 - t1, t1 - t0, {module!r} in sys.modules)
"""


def fresh_process_hit(backend_name: str, cache: Path, name: str, onnx: Path, shapes) -> tuple[float, float, bool]:
    """(provider + get, imports, backend module imported?) of a cache hit in a new Python process.

    Like the first engine of a pytest session: pytest and pytest_trt are loaded, the provider's modules
    and the backend module are not.
    """
    script = HIT_SCRIPT.format(name=name, onnx=str(onnx), shapes=shapes, backend=backend_name, cache=str(cache),
                               module=registry.spec(backend_name).module)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.split()
    return float(out[0]), float(out[1]), out[2] == "True"


def bench_model(backend, work: Path, name: str, onnx: Path, shapes, runs: int) -> dict[str, float]:
    trt = backend.trt
    config = BuildConfig(name=name, onnx=onnx, profiles=[Profile(input=shapes)])
    bare_build(trt, onnx, shapes)  # warm-up both paths
    warm = session_provider(backend.name, work / f"{name}-warm", build=True)
    warm.get(config)
    warm.flush()
    plugin_s, bare_s, plugin_bsn, bare_bsn, floor_s = [], [], [], [], []
    size = 0

    def plugin_run(i: int) -> None:
        nonlocal size
        t0 = time.perf_counter()
        provider = session_provider(backend.name, work / f"{name}-miss{i}", build=True)
        engine = provider.get(config)
        assert not provider.flush()  # the cache write is part of the cost: inside the timed region
        plugin_s.append(time.perf_counter() - t0)
        plugin_bsn.append(engine.result.durations["build"])
        size = len(engine.result.engine)

    def bare_run() -> None:
        whole, bsn = bare_build(trt, onnx, shapes)
        bare_s.append(whole)
        bare_bsn.append(bsn)

    def floor_run() -> None:
        floor_s.append(bare_build(trt, onnx, shapes, evidence=True)[0])

    for i in range(runs):  # rotate which goes first, so none profits from the others' warm caches
        order = [functools.partial(plugin_run, i), bare_run, floor_run]
        for k in range(3):
            order[(i + k) % 3]()
        if i:
            shutil.rmtree(work / f"{name}-miss{i}", ignore_errors=True)
    hit_s: list[float] = []
    for _ in range(runs * 2):
        t0 = time.perf_counter()
        provider = session_provider(backend.name, work / f"{name}-miss0", build=False)
        engine = provider.get(config)
        hit_s.append(time.perf_counter() - t0)
        assert engine.cached
    fresh = [fresh_process_hit(backend.name, work / f"{name}-miss0", name, onnx, shapes) for _ in range(5)]
    fresh_hit = statistics.median(f[0] for f in fresh)
    fresh_imports = statistics.median(f[1] for f in fresh)
    imported = any(f[2] for f in fresh)
    mp, mb, mh, mf = (statistics.median(x) for x in (plugin_s, bare_s, hit_s, floor_s))
    ip, ib = statistics.median(plugin_bsn), statistics.median(bare_bsn)
    print(f"{name}: engine {size / 1e6:.1f} MB, {runs} alternating runs (medians)")
    print(f"  cache-miss build through pytest-trt (cache write included) {mp * 1000:8.1f} ms")
    print(f"  bare build_serialized_network (WARNING logger)              {mb * 1000:8.1f} ms")
    print(f"  ratio plugin/bare {mp / mb:.3f}   target <= 1.05   {'MET' if mp / mb <= 1.05 else 'NOT MET'}   "
          f"(per-run ratios {', '.join(f'{a / b:.3f}' for a, b in zip(plugin_s, bare_s, strict=True))})")
    print(f"  bare build keeping the evidence (VERBOSE capture, DETAILED) {mf * 1000:8.1f} ms   "
          f"= {mf / mb:.3f} x bare: TensorRT's own cost of the log pytest-trt must keep")
    print(f"  ratio plugin/evidence floor {mp / mf:.3f}   target <= 1.05   {'MET' if mp / mf <= 1.05 else 'NOT MET'}   "
          "(pytest-trt's own overhead: read-back, result, cache write)")
    print(f"    inside build_serialized_network: plugin {ip * 1000:.1f} ms vs bare {ib * 1000:.1f} ms; "
          f"outside it: plugin {(mp - ip) * 1000:.1f} ms vs bare {(mb - ib) * 1000:.1f} ms")
    print(f"  cache hit (key, hash check, load) in this process   {mh * 1000:6.1f} ms   target <= 20 ms   "
          f"{'MET' if mh <= 0.020 else 'NOT MET'}")
    print(f"  cache hit in a fresh process (provider + get)      {fresh_hit * 1000:6.1f} ms   target <= 20 ms   "
          f"{'MET' if fresh_hit <= 0.020 else 'NOT MET'}   "
          f"(+{fresh_imports * 1000:.0f} ms importing pytest and pytest_trt; "
          f"{registry.spec(backend.name).module} imported: {'yes' if imported else 'no'})")
    return {"plugin_s": mp, "bare_s": mb, "hit_s": mh, "fresh_hit_s": fresh_hit}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--module", default="tensorrt_rtx")
    ap.add_argument("--models", default="example,mnv2_224")
    args = ap.parse_args()
    from benchmarks.models import write as write_mnv2

    backend = registry.create_backend(registry.name_of_module(args.module))
    print(f"{backend.name} {backend.version()}")
    with tempfile.TemporaryDirectory(prefix="bench_build_") as tmp:
        work = Path(tmp)
        models = {"example": (write_all(work / "models")["mobilenet_v2"], SHAPES),
                  "mnv2_224": (write_mnv2(work / "models" / "mobilenet_v2_224.onnx"), MNV2_SHAPES)}
        for name in args.models.split(","):
            onnx, shapes = models[name]
            bench_model(backend, work, name, onnx, shapes, args.runs)


if __name__ == "__main__":
    main()
