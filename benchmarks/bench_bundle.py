"""Audit bundle cost against its cache-miss build (run by hand).

    PYTHONPATH=. python benchmarks/bench_bundle.py [--rounds 7] [--model mnv2_224|example]

Builds the torchvision-size MobileNetV2 of ``benchmarks/models.py`` (224x224,
batch 1/4/8, a 14.7 MB engine; ``--model example``: the example MobileNetV2,
32x32, batch 1/8/32) as a cache miss through the plugin (EngineProvider with rebuild: build, VERBOSE capture,
cache store), then times, alternating with those builds:

* record: parsing the BuildRecord from the captured log (done once per
  engine; the bundle needs it, tests usually have it already);
* bundle: writing the bundle (manifest, gzip, tar, atomic rename);
* environment: capturing environment.json (once per session, not per bundle).

Prints medians, the bundle size, and bundle / build (issue #14 target: < 5 %
on the 14.5 MB engine).  The work folder is removed at exit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: examples/ is not installed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--model", choices=("mnv2_224", "example"), default="mnv2_224")
    args = ap.parse_args()
    import shutil

    from benchmarks.models import mobilenet_v2_224
    from examples.models import mobilenet_v2, save
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.config import BuildConfig, Profile
    from pytest_trt.session import EngineProvider

    work = Path(tempfile.mkdtemp(prefix="bench_bundle_"))
    if args.model == "example":
        onnx = save(mobilenet_v2(), work / "mobilenet_v2.onnx")
        shapes = ((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    else:
        onnx = save(mobilenet_v2_224(), work / "mobilenet_v2_224.onnx")
        shapes = ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    config = BuildConfig(name="mobilenet_v2", version="1.2.3", onnx=onnx, precision="typed",
                         profiles=[Profile(input=shapes)])
    backend = create_backend("tensorrt-rtx")
    backend.build(config)  # warm-up: library loading is not part of a build

    t = time.perf_counter()
    env = capture_environment(backend=backend.name, rootdir=Path.cwd())
    env_s = time.perf_counter() - t

    builds, records, bundles = [], [], []
    size = 0
    for i in range(args.rounds):
        provider = EngineProvider(backend.name, cache_dir=work / "cache", build=True, rebuild=True, backend=backend)
        t = time.perf_counter()
        engine = provider.get(config)
        builds.append(time.perf_counter() - t)
        provider.flush()  # the cache entry is written behind the build; not part of either figure
        result = engine.result
        t = time.perf_counter()
        record = engine.record
        records.append(time.perf_counter() - t)
        t = time.perf_counter()
        info = write_bundle(result, work / f"round{i}", record=record, environment=env)
        bundles.append(time.perf_counter() - t)
        size = info.size
    build, rec, bun = (statistics.median(x) for x in (builds, records, bundles))
    print(f"engine {len(result.engine):,} bytes, log {len(result.log)} messages, {args.rounds} rounds (medians)")
    print(f"cache-miss (plugin)  {build * 1000:8.1f} ms")
    print(f"record parse          {rec * 1000:8.1f} ms")
    print(f"bundle write          {bun * 1000:8.1f} ms   size {size:,} bytes")
    print(f"environment capture   {env_s * 1000:8.1f} ms   (once per session)")
    print(f"bundle / build        {bun / build:8.1%}   target < 5%   {'MET' if bun / build < 0.05 else 'NOT MET'}")
    print(f"(record+bundle)/build {(rec + bun) / build:8.1%}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
