"""Benchmark: parse a ~100 MB VERBOSE TensorRT log (real corpus logs repeated) with ``read_log``.

Run by hand from the repository root::

    python benchmarks/bench_logparse.py [--mb 100] [--keep PATH]
    python benchmarks/bench_logparse.py --mb 25,100,400     # memory growth with the log's size

The parse runs in a fresh subprocess so the peak-memory figure is the parser's
own: ``ru_maxrss`` after parsing minus ``ru_maxrss`` after the imports, and the
``tracemalloc`` peak of Python allocations during the parse.  Then parses
alternate with a plain ``for line in f`` scan of the same file.  Targets: >= 200 MB/s and >= 25% of the line
scan's speed.  With several sizes, the RSS and tracemalloc peaks' slope from the smallest log to the largest, in
MiB per MB of log (target < 0.01: memory independent of the log's size beyond the record's own; a log of repeated
builds gives the last build's record).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "trt_logs"
LOGS = (  # complete trtexec VERBOSE logs of four TensorRT generations, plus TensorRT-RTX DETAILED logs
    "log_trt8.0.3_cookbook_mnist_fp32_trtexec_verbose.txt",
    "log_trt8.5.2_trex_yolo_qat_int8_trtexec_verbose.txt",
    "log_trt8.6.1_segformer_fp32_trtexec_verbose.txt",
    "log_trt10.14.1_cookbook_mnist_fp16_trtexec_verbose.txt",
    "log_trt10.16.1_cookbook_mnist_fp16_trtexec_verbose.txt",
    "log_rtx1.7.1_mobilenet_v2_detailed.txt",
)

_CHILD = r"""
import json, resource, sys, time, tracemalloc
sys.path.insert(0, sys.argv[2])
from pytest_trt.buildlog.readers import read_log
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.perf_counter()
record = read_log(sys.argv[1])
elapsed = time.perf_counter() - t0
_, traced_peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# untraced runs (tracemalloc slows allocation-heavy code), alternating with a plain line scan of the file
def scan(path):
    n = 0
    with open(path, encoding="utf-8", errors="replace", newline=None) as f:
        for _ in f:
            n += 1
    return n
runs, scans = [], []
for _ in range(int(sys.argv[3])):
    t0, c0 = time.perf_counter(), time.process_time()
    read_log(sys.argv[1])
    runs.append((time.perf_counter() - t0, time.process_time() - c0))
    t0, c0 = time.perf_counter(), time.process_time()
    scan(sys.argv[1])
    scans.append((time.perf_counter() - t0, time.process_time() - c0))
import statistics
untraced, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
scan_s, scan_cpu = statistics.median(r[0] for r in scans), statistics.median(r[1] for r in scans)
print(json.dumps({"elapsed_traced_s": elapsed, "elapsed_s": untraced, "cpu_s": cpu, "rss_delta_kib": peak - base,
                  "scan_s": scan_s, "scan_cpu_s": scan_cpu,
                  "traced_peak_bytes": traced_peak, "lines": record.total_lines,
                  "unparsed": record.unparsed_lines, "layers": len(record.layers),
                  "fusion_events": len(record.fusion_events), "builds": record.builds,
                  "record_bytes": len(record.to_json())}))
"""


def make_log(path: Path, megabytes: float) -> int:
    """Write real logs repeated to ``path`` until it holds ``megabytes`` MB; return its size."""
    chunks = [(CORPUS / name).read_bytes() for name in LOGS]
    target = int(megabytes * 1_000_000)
    size = 0
    with open(path, "wb") as f:
        while size < target:
            for chunk in chunks:
                f.write(chunk)
                size += len(chunk)
    return size


def measure(megabytes: float, runs: int, keep: Path | None) -> tuple[float, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = keep or Path(tmp) / "big_verbose.log"
        size = make_log(path, megabytes)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(ROOT), str(runs)], check=True,
                             capture_output=True, text=True)
        res: dict[str, Any] = json.loads(out.stdout)
    mb = size / 1e6
    print(f"log: {mb:.1f} MB, {res['lines']} lines ({res['unparsed']} unparsed), {res['builds']} builds, "
          f"{res['layers']} layers in the last listing, {res['fusion_events']} fusion events in the last build")
    print(f"parse: {res['elapsed_s']:.2f} s wall, {res['cpu_s']:.2f} s CPU; plain line scan of the same file: "
          f"{res['scan_s']:.2f} s wall, {res['scan_cpu_s']:.2f} s CPU (medians of {runs}, alternating; "
          f"tracemalloc run {res['elapsed_traced_s']:.2f} s; load average {os.getloadavg()[0]:.1f})")
    for what, t, s in (("wall", res["elapsed_s"], res["scan_s"]), ("CPU", res["cpu_s"], res["scan_cpu_s"])):
        rate, share = mb / t, s / t
        print(f"  {what:4s}: {rate:6.1f} MB/s   target >= 200 MB/s   {'MET' if rate >= 200 else 'NOT MET'};   "
              f"{100 * share:5.1f}% of a line scan   target >= 25%   {'MET' if share >= 0.25 else 'NOT MET'}")
    print(f"peak memory above baseline: RSS +{res['rss_delta_kib'] / 1024:.1f} MiB, "
          f"tracemalloc peak {res['traced_peak_bytes'] / 2**20:.2f} MiB, "
          f"record JSON {res['record_bytes'] / 1e6:.2f} MB")
    return mb, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", default="100", help="MB of log; several, comma separated, print the memory slope")
    ap.add_argument("--keep", type=Path, default=None, help="write the big log here and keep it (one size)")
    ap.add_argument("--runs", type=int, default=5, help="alternating parse / line-scan rounds (medians)")
    args = ap.parse_args()
    sizes = [float(x) for x in str(args.mb).split(",")]
    results = [measure(mb, args.runs, args.keep if len(sizes) == 1 else None) for mb in sizes]
    if len(results) > 1:
        (mb0, r0), (mb1, r1) = results[0], results[-1]
        rss = (r1["rss_delta_kib"] - r0["rss_delta_kib"]) / 1024 / (mb1 - mb0)
        traced = (r1["traced_peak_bytes"] - r0["traced_peak_bytes"]) / 2**20 / (mb1 - mb0)
        print(f"memory slope {mb0:.0f} -> {mb1:.0f} MB: RSS {rss:+.4f} MiB per MB, tracemalloc {traced:+.4f} MiB per "
              f"MB   target < 0.01   {'MET' if max(rss, traced) < 0.01 else 'NOT MET'}")


if __name__ == "__main__":
    main()
