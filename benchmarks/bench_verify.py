"""Cost of bundle verification with the canonical-bytes check, on the example MobileNetV2 (run by hand).

    PYTHONPATH=. python benchmarks/bench_verify.py [--rounds 7]

Builds the example MobileNetV2 once with TensorRT-RTX, writes its bundle (engine included), then times,
alternating in each round:

* write: ``write_bundle`` (what every session pays per engine);
* verify: ``verify_bundle`` as shipped (bounded header checks, member hashes, recompression of the members
  and byte comparison with the file, JSON schema checks);
* before: the verifier as it was before the hardening (``--before`` commit, loaded from git): tarfile stream
  read, member hashes, JSON parse and BuildRecord check; no bounds, no canonical check, no schema check.

Prints medians and the ratios verify / before and verify / write.  The recorder verifies an existing bundle
before rewriting it with new golden verdicts, so verify must stay of the order of a write.  ``--size 224``
(default) builds the model with MobileNetV2's 17 blocks at ImageNet resolution, 1000 classes: a real-size
engine (random weights).
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
    """``verify_bundle`` of ``commit``, with the archive module of that commit (both loaded from git)."""
    import subprocess
    import types

    root = Path(__file__).resolve().parents[1]

    def source(path: str) -> str:
        return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, check=True, capture_output=True,
                              text=True).stdout

    archive = types.ModuleType("old_archive")
    exec(compile(source("pytest_trt/audit/archive.py"), "old_archive", "exec"), archive.__dict__)
    sys.modules["old_archive"] = archive
    verify = types.ModuleType("old_verify")
    text = source("pytest_trt/audit/verify.py")
    text = text.replace("from pytest_trt.audit.archive import", "from old_archive import")
    sys.modules["old_verify"] = verify  # dataclasses look their module up
    exec(compile(text, "old_verify", "exec"), verify.__dict__)
    return verify.verify_bundle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--before", default="f96ee4a", help="commit of the verifier before the hardening")
    args = ap.parse_args()

    from examples.models import mobilenet_v2
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.buildlog.readers import parse_entries
    from tests.audit.rtx_build import build_rtx

    before = _old_verifier(args.before)
    model = mobilenet_v2(size=args.size, num_classes=1000, blocks=FULL_BLOCKS)
    result = build_rtx(model, name="mobilenet_v2", version="1", max_batch=8, hw=args.size)
    record = parse_entries(result.log)
    env = capture_environment(backend="tensorrt-rtx", rootdir=None)
    times: dict[str, list[float]] = {"write": [], "verify": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = write_bundle(result, Path(tmp), record=record, environment=env).path
        for _ in range(args.rounds):
            t = time.perf_counter()
            write_bundle(result, Path(tmp), record=record, environment=env)
            times["write"].append(time.perf_counter() - t)
            t = time.perf_counter()
            verify_bundle(path)
            times["verify"].append(time.perf_counter() - t)
            t = time.perf_counter()
            before(path)
            times["before"].append(time.perf_counter() - t)
        size = path.stat().st_size
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"bundle: {size:,} bytes (engine {len(result.engine):,} bytes), {args.rounds} rounds, medians:")
    for k, v in med.items():
        print(f"  {k:9} {v * 1000:8.1f} ms")
    print(f"verify / before: {med['verify'] / med['before']:.2f}x   verify / write: "
          f"{med['verify'] / med['write']:.2f}x")


if __name__ == "__main__":
    main()
