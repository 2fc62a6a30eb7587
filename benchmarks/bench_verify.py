"""``bundle verify`` against its floor, a read + sha256 of the same file, on a real-size engine (run by hand).

    PYTHONPATH=. python benchmarks/bench_verify.py [--rounds 9] [--model mnv2_224|example] [--before COMMIT]

Builds the torchvision-size MobileNetV2 of ``benchmarks/models.py`` (224x224, 1000 classes, a 14.7 MB engine;
``--model example``: the example MobileNetV2 at ``--size``) with TensorRT-RTX, writes its bundle (engine
included), and the bundle of the 16x16 conv_bn_relu example (fixed costs).  Then times, alternating in each
round:

* floor: the file read in 1 MiB blocks and hashed (sha256), the least any check of the file's bytes costs;
* verify: ``verify_bundle`` as shipped (bounded header checks, member hashes, the file's sha256, recompression
  of the members and byte comparison with the file, JSON schema checks);
* write: ``write_bundle`` of the same result (what every session pays per engine);
* before (``--before COMMIT``): the verifier of that commit, loaded from git, on the same file.

Prints medians, verify / floor against the 3x target for the engine's bundle, the small bundle's verify in
ms (its own line: fixed costs, no ratio target), and the 1-minute load average before and after.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: tests/ is not installed


#: MobileNetV2's inverted-residual table (expansion t, channels c, repeats n, stride s), one entry per block
FULL_BLOCKS = tuple((t, c, s if i == 0 else 1) for t, c, n, s in (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    for i in range(n))


def _old_verifier(commit: str) -> Any:
    """``verify_bundle`` of ``commit``, with that commit's archive, tarstream, tarscan and schema modules (from git)."""
    import subprocess
    import types

    root = Path(__file__).resolve().parents[1]

    def source(path: str) -> str | None:
        done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
        return done.stdout if done.returncode == 0 else None

    def load(name: str, text: str) -> types.ModuleType:
        for dep in ("archive", "tarstream", "tarscan", "schema"):
            text = text.replace(f"from pytest_trt.audit.{dep} import", f"from old_{dep} import")
            text = text.replace(f"from pytest_trt.audit import {dep}\n", f"import old_{dep} as {dep}\n")
        module = types.ModuleType(name)
        sys.modules[name] = module  # dataclasses look their module up
        exec(compile(text, name, "exec"), module.__dict__)
        return module

    for dep in ("archive", "schema", "tarstream", "tarscan"):  # the order of their own imports
        text = source(f"pytest_trt/audit/{dep}.py")
        if text is not None:
            load(f"old_{dep}", text)
    return load("old_verify", source("pytest_trt/audit/verify.py") or "").verify_bundle


def _floor(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def main() -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--model", choices=("mnv2_224", "example"), default="mnv2_224")
    ap.add_argument("--size", type=int, default=224, help="--model example: input height and width (default 224)")
    ap.add_argument("--before", default=None, help="also time the verifier of this commit (loaded from git)")
    args = ap.parse_args()

    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.buildlog.readers import parse_entries
    from tests.audit.rtx_build import build_rtx, build_small

    before = _old_verifier(args.before) if args.before else None
    if args.model == "mnv2_224":
        from benchmarks.models import mobilenet_v2_224

        model, hw = mobilenet_v2_224(), 224
    else:
        from examples.models import mobilenet_v2

        model, hw = mobilenet_v2(size=args.size, num_classes=1000, blocks=FULL_BLOCKS), args.size
    result = build_rtx(model, name="mobilenet_v2", version="1", max_batch=8, hw=hw)
    small = build_small()
    env = capture_environment(backend="tensorrt-rtx", rootdir=None)
    load = [os.getloadavg()[0]]
    times: dict[str, list[float]] = {"floor": [], "verify": [], "write": [], "small floor": [], "small verify": []}
    if before is not None:
        times["before"] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = write_bundle(result, Path(tmp), record=parse_entries(result.log), environment=env).path
        small_dir = Path(tmp) / "small"
        small_dir.mkdir()
        small_path = write_bundle(small, small_dir, record=parse_entries(small.log), environment=env).path
        assert verify_bundle(path).sha256 == _floor(path)  # the same file, the same digest
        for _ in range(args.rounds):
            for name, fn in (("floor", lambda: _floor(path)), ("verify", lambda: verify_bundle(path)),
                             ("write", lambda: write_bundle(result, Path(tmp), record=parse_entries(result.log),
                                                            environment=env)),
                             ("small floor", lambda: _floor(small_path)),
                             ("small verify", lambda: verify_bundle(small_path)),
                             *((("before", lambda: before(path)),) if before is not None else ())):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
        size, small_size = path.stat().st_size, small_path.stat().st_size
    load.append(os.getloadavg()[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"bundle: {size:,} bytes (engine {len(result.engine):,} bytes), {args.rounds} rounds, medians; "
          f"1-min load {load[0]:.1f} -> {load[1]:.1f}")
    for k in ("floor", "verify", "write", "before"):
        if k in med:
            print(f"  {k:13} {med[k] * 1000:8.1f} ms")
    print(f"verify / floor (read + sha256): {med['verify'] / med['floor']:.2f}x  (target <= 3x)   "
          f"verify / write: {med['verify'] / med['write']:.2f}x"
          + (f"   verify / before: {med['verify'] / med['before']:.2f}x" if "before" in med else ""))
    print(f"small bundle ({small_size:,} bytes, 16x16 conv_bn_relu): verify {med['small verify'] * 1000:.1f} ms, "
          f"floor {med['small floor'] * 1000:.2f} ms (fixed costs; no ratio target)")


if __name__ == "__main__":
    main()
