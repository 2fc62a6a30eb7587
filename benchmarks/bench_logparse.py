"""Benchmark: parse a ~100 MB VERBOSE TensorRT log (real corpus logs repeated) with ``read_log``.

Run by hand from the repository root::

    python benchmarks/bench_logparse.py [--mb 100] [--keep PATH]

The parse runs in a fresh subprocess so the peak-memory figure is the parser's
own: ``ru_maxrss`` after parsing minus ``ru_maxrss`` after the imports, and the
``tracemalloc`` peak of Python allocations during the parse.  Then parses
alternate with a plain ``for line in f`` scan of the same file.  Targets (issue
14): >= 200 MB/s and >= 25% of the line scan's speed, memory as before.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

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
                  "fusion_events": len(record.fusion_events)}))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--keep", type=Path, default=None, help="write the big log here and keep it")
    ap.add_argument("--runs", type=int, default=5, help="alternating parse / line-scan rounds (medians)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "big_verbose.log"
        size = make_log(path, args.mb)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(ROOT), str(args.runs)], check=True,
                             capture_output=True, text=True)
        res = json.loads(out.stdout)
    mb = size / 1e6
    print(f"log: {mb:.1f} MB, {res['lines']} lines ({res['unparsed']} unparsed), "
          f"{res['layers']} layers in the last listing, {res['fusion_events']} fusion events")
    print(f"parse: {res['elapsed_s']:.2f} s wall, {res['cpu_s']:.2f} s CPU; plain line scan of the same file: "
          f"{res['scan_s']:.2f} s wall, {res['scan_cpu_s']:.2f} s CPU (medians of {args.runs}, alternating; "
          f"tracemalloc run {res['elapsed_traced_s']:.2f} s; load average {os.getloadavg()[0]:.1f})")
    for what, t, s in (("wall", res["elapsed_s"], res["scan_s"]), ("CPU", res["cpu_s"], res["scan_cpu_s"])):
        rate, share = mb / t, s / t
        print(f"  {what:4s}: {rate:6.1f} MB/s   target >= 200 MB/s   {'MET' if rate >= 200 else 'NOT MET'};   "
              f"{100 * share:5.1f}% of a line scan   target >= 25%   {'MET' if share >= 0.25 else 'NOT MET'}")
    print(f"peak memory above baseline: RSS +{res['rss_delta_kib'] / 1024:.1f} MiB, "
          f"tracemalloc peak {res['traced_peak_bytes'] / 2**20:.1f} MiB (target: as before this change, "
          "RSS +25 MiB / 9.8 MiB measured at 8dc4855)")


if __name__ == "__main__":
    main()
