"""``pytest-trt upgrade-report`` over 500 bundle pairs (run by hand).  Target: under 10 s for the whole report.

    python benchmarks/bench_upgrade_report.py [OLD_RUN NEW_RUN] [--pairs 500] [--repeat 3]

OLD_RUN and NEW_RUN are bundle folders of two real runs of one suite (for example
the TensorRT-RTX 1.4 and 1.7 runs and the ONNX Runtime 1.20 and 1.32 runs of the
README's "Upgrade review", joined with commas); by default both are the committed
TensorRT-RTX 1.4 run of the example suite (224x224 MobileNetV2, engine hash only).
Their paired bundles are copied under new config names until there are
``--pairs`` pairs, each copy a valid bundle (config.json renamed, manifest
recomputed) with the sidecar the recorder writes beside a bundle.  Timed side by
side in one process, on the command's path (read every bundle, pair, review, draw
every picture, write the HTML; ``pytest_trt.cli.main``): with verified facts (sidecars, unchanged files;
the target is judged on this one), and with ``--reverify`` (every bundle verified
once, as for bundles never verified before).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_trt.audit.archive import write_tar_gz  # noqa: E402
from pytest_trt.audit.facts import FactsReader  # noqa: E402
from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex  # noqa: E402
from pytest_trt.audit.sidecar import members_digest, write_state  # noqa: E402
from pytest_trt.audit.sign import SIGNATURE  # noqa: E402
from pytest_trt.cli import main as main_cli  # noqa: E402
from pytest_trt.upgrade.pairing import load_run, pair_runs  # noqa: E402


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _copy(src: Path, dst_dir: Path, name: str) -> None:
    members = _members(src)
    config = json.loads(members["config.json"])
    config["pinned"]["name"] = name
    members["config.json"] = (json.dumps(config, sort_keys=True, separators=(",", ":")) + "\n").encode()
    members.pop(MANIFEST, None)
    members[MANIFEST] = render_manifest({k: sha256_hex(v) for k, v in members.items()})
    path = dst_dir / f"{name}.tar.gz"
    with open(path, "wb") as fh:
        write_tar_gz(members, fh)
    data = path.read_bytes()  # the recorder's sidecar, as written beside every bundle it makes
    write_state(path, members_sha256=members_digest(members[MANIFEST], members.get(SIGNATURE)),
                sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                engine_sha256=json.loads(members["build.json"])["build"]["engine_sha256"], golden=None,
                inputs_sha256=None)


def replicate(old: str, new: str, pairs: int, out: Path) -> tuple[Path, Path]:
    pairing = pair_runs(load_run(old), load_run(new))
    sources = [(a, b) for a, b in pairing.pairs if a.bundle is not None and b.bundle is not None]
    if not sources:
        sys.exit("no paired bundles in the two runs")
    a_dir, b_dir = out / "old", out / "new"
    a_dir.mkdir()
    b_dir.mkdir()
    for i in range(pairs):
        a, b = sources[i % len(sources)]
        _copy(Path(a.path), a_dir, f"{a.name}_{i:03d}")
        _copy(Path(b.path), b_dir, f"{b.name}_{i:03d}")
    return a_dir, b_dir


def _report(a: Path, b: Path, html: Path, *, reverify: bool) -> tuple[float, tuple[int, int]]:
    """``pytest-trt upgrade-report A B -o HTML`` in this process: seconds, (bundles read from facts, verified)."""
    readers: list[FactsReader] = []
    init = FactsReader.__init__

    def recording(self: FactsReader, **kw: Any) -> None:  # how the command read its bundles
        init(self, **kw)
        readers.append(self)

    FactsReader.__init__ = recording  # type: ignore[method-assign]
    try:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main_cli(["upgrade-report", str(a), str(b), "-o", str(html), *(["--reverify"] if reverify else [])])
        took = time.perf_counter() - t0
    finally:
        FactsReader.__init__ = init  # type: ignore[method-assign]
    [reader] = readers
    return took, (reader.from_facts, reader.verified)


def mnv2_runs(out: Path) -> tuple[str, str]:
    """Two one-bundle runs of the 224x224 MobileNetV2 (benchmarks/models.py) built by TensorRT-RTX, engine included:
    the old run's check passed, the new run's failed."""
    from benchmarks.models import mobilenet_v2_224
    from examples.models import save
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.audit.environment import capture_environment
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.buildlog.readers import parse_entries
    from pytest_trt.config import BuildConfig, Profile

    onnx = save(mobilenet_v2_224(), out / "mobilenet_v2_224.onnx")
    shapes = ((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))
    config = BuildConfig(name="mobilenet_v2", version="1.2.3", onnx=onnx, precision="typed",
                         profiles=[Profile(input=shapes)])
    result = create_backend("tensorrt-rtx").build_config(config)
    env = capture_environment(backend=result.backend, rootdir=None)
    record = parse_entries(result.log)
    runs = []
    for run, verdict in (("old_run", "pass"), ("new_run", "fail")):
        golden = {"t.py::acc": {"config_hash": result.config_hash, "verdict": verdict, "message": None}}
        write_bundle(result, out / run, record=record, environment=env, golden_results=golden)
        runs.append(str(out / run))
    return runs[0], runs[1]


def main() -> None:
    rtx14 = str(Path(__file__).resolve().parents[1] / "tests" / "data" / "upgrade" / "rtx14")
    ap = argparse.ArgumentParser()
    ap.add_argument("old", nargs="?", default=rtx14)
    ap.add_argument("new", nargs="?", default=rtx14)
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--synthetic", choices=("mnv2",), help="replicate a fresh 224x224 MobileNetV2 bundle with its "
                    "engine (14.7 MB each: use --pairs 50) instead of OLD and NEW")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.synthetic:
            args.old, args.new = mnv2_runs(Path(tmp))
        a, b = replicate(args.old, args.new, args.pairs, Path(tmp))
        size = sum(p.stat().st_size for p in (*a.glob("*.tar.gz"), *b.glob("*.tar.gz")))
        print(f"{args.pairs} pairs, {size / 1e6:.1f} MB of bundles (load {os.getloadavg()[0]:.1f})")
        html = Path(tmp) / "report.html"
        facts, full = [], []
        for _ in range(args.repeat):  # alternating
            t, read = _report(a, b, html, reverify=False)
            facts.append(t)
            assert read == (2 * args.pairs, 0), read
            t, read = _report(a, b, html, reverify=True)
            full.append(t)
            assert read == (0, 2 * args.pairs), read
        med_facts, med_full = statistics.median(facts), statistics.median(full)
        print(f"report from verified facts (sidecars): median {med_facts:.2f} s "
              f"({med_facts / args.pairs * 1000:.1f} ms/pair; runs {', '.join(f'{t:.2f}' for t in facts)})")
        print(f"report with --reverify (each bundle verified once): median {med_full:.2f} s "
              f"({med_full / args.pairs * 1000:.1f} ms/pair)")
        scale = 500 / args.pairs
        print(f"facts/reverify {med_facts / med_full:.2f}; 500 pairs from facts: {med_facts * scale:.2f} s "
              f"= {med_facts * scale / 10:.2f} of the 10 s target -> {'OK' if med_facts * scale < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
