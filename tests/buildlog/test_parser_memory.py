"""A log of several builds gives the last build's record and counts its builds; parse memory does not grow with it.

Real corpus logs repeated: the record of a log held 8 times equals the log's own (layers, fusion events, removed
layers, layer counts) with ``builds == 8``.  Memory: the tracemalloc peak of parsing the 2 MB corpus logs, 16 times
over against once, measured in a fresh process, grows by less than 0.3 MiB (keeping every build's fusion events
grows it by 1.6-2.0 MiB).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.buildlog.readers import read_log
from pytest_trt.buildlog.summary import record_summary, render_record_summary

LOGS = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
#: corpus logs with a layer count (each build starts at "Original: N layers") and fusion events
BUILD_LOGS = ("log_trt8.5.2_trex_yolo_qat_int8_trtexec_verbose.txt", "log_trt8.6.1_segformer_fp32_trtexec_verbose.txt",
              "log_trt10.14.1_cookbook_mnist_fp16_trtexec_verbose.txt", "log_trt8.0.3_cookbook_mnist_fp32_trtexec_verbose.txt",
              "log_rtx1.7.1_mobilenet_v2_detailed.txt")


@pytest.mark.parametrize("name", BUILD_LOGS)
def test_repeated_log_gives_the_last_builds_record(tmp_path: Path, name: str) -> None:
    data = (LOGS / name).read_bytes()
    assert data.count(b"Original: ") == 1  # one build per corpus log
    repeated = tmp_path / "x8.log"
    repeated.write_bytes(data * 8)
    one, eight = read_log(LOGS / name), read_log(repeated)
    assert one.builds == 1 and eight.builds == 8
    assert eight.layers == one.layers
    assert eight.fusion_events == one.fusion_events
    assert eight.removed_layers == one.removed_layers
    assert eight.layer_counts == one.layer_counts and one.layer_counts[0][0] == "Original"
    assert len(eight.messages) == 8 * len(one.messages)  # warnings of every build are evidence
    assert eight.total_lines == 8 * one.total_lines
    text = "\n".join(render_record_summary(record_summary(eight)))
    assert "builds in this log: 8; the record is the last build's" in text
    assert "builds in this log" not in "\n".join(render_record_summary(record_summary(one)))


def test_builds_count_survives_the_record_json(tmp_path: Path) -> None:
    data = (LOGS / BUILD_LOGS[2]).read_bytes()
    (tmp_path / "x3.log").write_bytes(data * 3)
    record = read_log(tmp_path / "x3.log")
    assert json.loads(record.to_json())["builds"] == 3
    assert type(record).from_json(record.to_json()) == record


PEAK = """
import sys, tracemalloc
from pytest_trt.buildlog.readers import read_log
read_log(sys.argv[1])  # imports and first-use caches
tracemalloc.start()
read_log(sys.argv[2])
print(tracemalloc.get_traced_memory()[1])
"""


def _peak(tmp_path: Path, name: str, times: int) -> int:
    log = tmp_path / f"{name}.x{times}"
    log.write_bytes((LOGS / name).read_bytes() * times)
    out = subprocess.run([sys.executable, "-c", PEAK, str(LOGS / name), str(log)], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.strip())


@pytest.mark.parametrize("name", BUILD_LOGS[:2])
def test_parse_memory_does_not_grow_with_repeated_builds(tmp_path: Path, name: str) -> None:
    once, sixteen = _peak(tmp_path, name, 1), _peak(tmp_path, name, 16)
    assert sixteen - once < 0.3 * 2**20, f"parse peak grew {(sixteen - once) / 2**20:.2f} MiB for 15 more builds"
