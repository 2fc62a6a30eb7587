"""Fusion events that name one node, one fusion count for ``log parse`` and ``log diff``, and ``log diff --tactics``.

Expected values are independent of the parser: the TensorRT 7 log is written here in the line shapes the corpus
NOTES quote (§3, 7.x python), with the answer fixed by hand; the tactic is read from the real 8.6.0 log with this
file's own regex.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.buildlog import read_log
from pytest_trt.buildlog.events import fusion_sets

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "trt_logs"
MNIST_860 = CORPUS / "log_trt8.6.0_cookbook_mnist_fp16_trtexec_verbose.txt"

#: 7.x python-logger shapes (NOTES §3): one event joins two ONNX nodes twice over (conv1 + bn1 + relu1); the others
#: name a single node: a node fused with itself, and a node with a TensorRT-internal shuffle (not an ONNX node)
TRT7_LOG = """[TensorRT] INFO: TensorRT version 7.1.3
[TensorRT] VERBOSE: Original: 6 layers
[TensorRT] VERBOSE: After dead-layer removal: 6 layers
[TensorRT] VERBOSE: Fusing convolution weights from conv1 with scale bn1
[TensorRT] VERBOSE: Fusing conv1 with relu1
[TensorRT] VERBOSE: Fusing conv2 with (Unnamed Layer* 5) [Shuffle]
[TensorRT] VERBOSE: Fusing convolution weights from conv3 with scale conv3
[TensorRT] VERBOSE: Fusing conv3 with conv3
[TensorRT] VERBOSE: After vertical fusions: 3 layers
"""
FUSED = ("bn1", "conv1", "relu1")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


@pytest.fixture
def trt7(tmp_path: Path) -> Path:
    path = tmp_path / "trt7.log"
    path.write_text(TRT7_LOG)
    return path


def test_events_naming_one_node_are_not_fusions(trt7: Path) -> None:
    record = read_log(trt7)
    assert len(record.fusion_events) == 5
    assert fusion_sets(record) == (FUSED,)


def test_log_parse_and_log_diff_count_the_same_fusions(trt7: Path, tmp_path: Path) -> None:
    parsed = cli("log", "parse", trt7)
    assert parsed.returncode == 0, parsed.stderr
    assert re.search(r"\bfusions: 1\b", parsed.stdout), parsed.stdout
    as_json = json.loads(cli("log", "parse", trt7, "--json").stdout)
    summary = as_json.get("summary", as_json)
    assert summary["fusions"] == 1
    diff = cli("log", "diff", trt7, trt7, "--json")
    assert diff.returncode == 0, diff.stderr
    doc = json.loads(diff.stdout)
    assert doc["old_summary"]["fusions"] == doc["new_summary"]["fusions"] == 1


def test_single_node_events_removed_change_nothing_and_a_lost_pair_is_reported(trt7: Path, tmp_path: Path) -> None:
    lines = TRT7_LOG.splitlines(keepends=True)
    no_single = tmp_path / "no_single.log"
    no_single.write_text("".join(line for line in lines if "conv2" not in line and "conv3" not in line))
    assert cli("log", "diff", trt7, no_single).returncode == 0
    no_relu = tmp_path / "no_relu.log"
    no_relu.write_text("".join(line for line in lines if "relu1" not in line))
    run = cli("log", "diff", trt7, no_relu, "--json")
    assert run.returncode == 1
    doc = json.loads(run.stdout)
    assert doc["diff"]["fusions_lost"] == [list(FUSED)] and doc["diff"]["fusions_gained"] == [["bn1", "conv1"]]


def _one_tactic_changed(tmp_path: Path) -> tuple[Path, str, str]:
    """A copy of the real 8.6.0 log whose listing gives 'Conv-1 + ReLU-2' another tactic."""
    text = MNIST_860.read_text()
    line = re.compile(r"^(Layer\(CaskConvolution\): Conv-1 \+ ReLU-2, Tactic: )(0x[0-9a-f]{16})", re.M)
    m = line.search(text)
    assert m is not None
    new = "0x1111111111111111"
    path = tmp_path / "new.log"
    path.write_text(text[: m.start(2)] + new + text[m.end(2):])
    return path, m[2], new


def test_log_diff_masks_tactics_unless_asked(tmp_path: Path) -> None:
    new, old_tactic, new_tactic = _one_tactic_changed(tmp_path)
    masked = cli("log", "diff", MNIST_860, new)
    assert masked.returncode == 0, masked.stdout + masked.stderr
    assert "1 tactic change(s) masked" in masked.stdout and new_tactic not in masked.stdout
    shown = cli("log", "diff", MNIST_860, new, "--tactics")
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert f"Conv-1 + ReLU-2: {old_tactic} -> {new_tactic}" in shown.stdout
    doc = json.loads(cli("log", "diff", MNIST_860, new, "--tactics", "--json").stdout)
    assert not doc["identical"]
    assert json.loads(cli("log", "diff", MNIST_860, new, "--json").stdout)["identical"]
