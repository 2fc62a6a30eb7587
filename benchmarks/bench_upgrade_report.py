"""``pytest-trt upgrade-report`` over 50 bundle pairs (run by hand).  Target: under 10 s for the whole report.

    python benchmarks/bench_upgrade_report.py OLD_RUN NEW_RUN [--pairs 50] [--repeat 3]

OLD_RUN and NEW_RUN are bundle folders of two real runs of one suite (for example
the TensorRT-RTX 1.4 and 1.7 runs and the ONNX Runtime 1.20 and 1.32 runs of the
README's "Upgrade review", joined with commas).  Their paired bundles are copied
under new config names until there are ``--pairs`` pairs, each copy a valid bundle
(config.json renamed, manifest recomputed), engines included where the runs
included them.  Timed side by side in one process: the whole command path
(read and verify every bundle, pair, review, draw every picture, write the HTML),
and the same without the HTML, so the share of the pictures shows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_trt.audit.archive import write_tar_gz  # noqa: E402
from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex  # noqa: E402
from pytest_trt.upgrade.pairing import load_run, pair_runs  # noqa: E402
from pytest_trt.upgrade.report import make_report, write_html  # noqa: E402


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
    with open(dst_dir / f"{name}.tar.gz", "wb") as fh:
        write_tar_gz(members, fh)


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pairs", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = replicate(args.old, args.new, args.pairs, Path(tmp))
        size = sum(p.stat().st_size for p in (*a.iterdir(), *b.iterdir()))
        print(f"{args.pairs} pairs, {size / 1e6:.1f} MB of bundles")
        full, bare, pictures = [], [], 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            report = make_report(str(a), str(b))
            write_html(report, Path(tmp) / "report.html")
            full.append(time.perf_counter() - t0)
            pictures = (Path(tmp) / "report.html").read_text().count("<svg ")
            t0 = time.perf_counter()
            make_report(str(a), str(b))
            bare.append(time.perf_counter() - t0)
        html_mb = (Path(tmp) / "report.html").stat().st_size / 1e6
        print(f"report with HTML ({pictures} pictures, {html_mb:.1f} MB): median {statistics.median(full):.2f} s "
              f"(runs {', '.join(f'{t:.2f}' for t in full)})")
        print(f"review only (no HTML):   median {statistics.median(bare):.2f} s")
        print(f"ratio with/without HTML: {statistics.median(full) / statistics.median(bare):.2f}; "
              f"target: report < 10 s -> {'met' if statistics.median(full) < 10 else 'NOT met'}")


if __name__ == "__main__":
    main()
