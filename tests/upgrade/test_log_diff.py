"""``pytest-trt log diff`` and fusion assertions on logs without a layer listing, on the real log corpus."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.buildlog import BuildRecord, assert_fused, assert_no_fusion, assert_precision, read_log
from pytest_trt.buildlog.events import event_groups, fusion_sets, uses_events

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "trt_logs"
MNIST_823 = CORPUS / "log_trt8.2.3_cookbook_mnist_fp32_trtexec_verbose.txt"
MNIST_841 = CORPUS / "log_trt8.4.1_cookbook_mnist_fp32_trtexec_verbose.txt"
MNIST_803 = CORPUS / "log_trt8.0.3_cookbook_mnist_fp32_trtexec_verbose.txt"
#: the exact TensorRT 7.1.3 trtexec lines quoted in the corpus NOTES (§ fusion lines)
TRT713_LINES = (
    "[02/18/2021-11:57:18] [V] [TRT] Fusing Conv_3 with Relu_4\n"
    "[02/18/2021-11:57:18] [V] [TRT] Fusing Conv_0 with Relu_1\n"
    "[02/18/2021-11:57:18] [V] [TRT] Merging layers: Conv_3 + Relu_4 || Conv_0 + Relu_1\n"
)
_LAYER_LINE = re.compile(r"^Layer\((?P<type>[^)]*)\): (?P<name>.+?), Tactic: ")


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def _without_listing(src: Path, dst: Path) -> Path:
    """The real log with its Engine Layer Information block cut out: what a TensorRT 7 log gives."""
    lines = src.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("Layer(") and "Engine Layer Information" not in line]
    dst.write_text("".join(kept))
    return dst


def _listing_fusions(path: Path) -> set[frozenset[str]]:
    """Fused layers of a log's listing, by an independent regex: names split on ' + ', helpers dropped."""
    out = set()
    for line in path.read_text().splitlines():
        m = _LAYER_LINE.match(line)
        if not m or m["type"] == "Reformat":
            continue
        parts = {p for p in m["name"].split(" + ") if not p.startswith(("(Unnamed", "unsqueeze_node_after_"))}
        if len(parts) >= 2:
            out.add(frozenset(parts))
    return out


@pytest.fixture(scope="module")
def events_only(tmp_path_factory: pytest.TempPathFactory) -> BuildRecord:
    return read_log(_without_listing(MNIST_803, tmp_path_factory.mktemp("t7") / "mnist_no_listing.log"))


def test_events_only_log_fusions_match_the_full_logs_listing(events_only: BuildRecord) -> None:
    assert not events_only.layers and uses_events(events_only)
    assert {frozenset(g) for g in event_groups(events_only)} == _listing_fusions(MNIST_803)
    assert len(_listing_fusions(MNIST_803)) == 6


def test_no_fusion_fails_on_an_events_only_log(events_only: BuildRecord) -> None:
    assert_fused(events_only, "Conv__25", "Relu")
    with pytest.raises(AssertionError) as info:
        assert_no_fusion(events_only, "Conv__27", "Relu_1", label="mnist-trt7")
    text = str(info.value)
    assert text.startswith("mnist-trt7: expected 'Conv__27', 'Relu_1' NOT to be fused, but 1 layer(s) hold all")
    assert "fused by the log's fusion events: Conv__27 + Relu_1" in text and "no layer listing" in text
    assert_no_fusion(events_only, "Conv__25", "Conv__27")


def test_precision_refused_without_listing(events_only: BuildRecord) -> None:
    with pytest.raises(AssertionError, match="no layer listing .only fusion events."):
        assert_precision(events_only, "Conv__25", "fp32")


def test_trt7_bare_and_horizontal_events(tmp_path: Path) -> None:
    log = tmp_path / "trt713.log"
    log.write_text(TRT713_LINES)
    record = read_log(log)
    assert fusion_sets(record) == (("Conv_0", "Conv_3", "Relu_1", "Relu_4"),)
    with pytest.raises(AssertionError, match="NOT to be fused"):
        assert_no_fusion(record, "Conv_3", "Relu_4")
    assert_fused(record, "Conv_3", "Relu_1")  # the horizontal merge joined both pairs
    with pytest.raises(AssertionError, match="only the nodes named in its fusion events are known"):
        assert_no_fusion(record, "Conv_3", "Relu_9")


def test_log_diff_cli_on_two_trt_versions_of_mnist() -> None:
    run = cli("log", "diff", MNIST_823, MNIST_841, "--json")
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    gained = {frozenset(s) for s in doc["diff"]["fusions_gained"]}
    lost = {frozenset(s) for s in doc["diff"]["fusions_lost"]}
    only_old, only_new = _listing_fusions(MNIST_823), _listing_fusions(MNIST_841)
    assert gained == only_new - only_old and lost == only_old - only_new
    assert frozenset({"Conv-1", "ReLU-2"}) in gained and frozenset({"Conv__25", "Relu"}) in lost
    assert doc["diff"]["versions"] == ["8.2.3", "8.4.1"]
    text = cli("log", "diff", MNIST_823, MNIST_841).stdout
    assert "backend version: 8.2.3 -> 8.4.1" in text and "fusions gained (5):" in text
    assert "  Conv-1 + ReLU-2" in text


def test_log_diff_cli_events_only_against_listing(tmp_path: Path) -> None:
    stripped = _without_listing(MNIST_803, tmp_path / "old.log")
    run = cli("log", "diff", stripped, MNIST_803, "--json")
    doc = json.loads(run.stdout)
    assert doc["old_summary"]["fusions_from"].startswith("fusion events")
    assert doc["diff"]["fusions_gained"] == [] and doc["diff"]["fusions_lost"] == []


def test_log_diff_exit_code_survives_a_closed_pipe() -> None:
    """`pytest-trt log diff A B | true` under pipefail: the reader leaves at once, the verdict (1) stands."""
    command = f"set -o pipefail; {sys.executable} -m pytest_trt.cli log diff {MNIST_823} {MNIST_841} | true"
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr, run.stderr


def test_log_diff_same_log_and_missing_file(tmp_path: Path) -> None:
    same = cli("log", "diff", MNIST_841, MNIST_841)
    assert same.returncode == 0 and "build records match" in same.stdout
    missing = cli("log", "diff", tmp_path / "nope.log", MNIST_841)
    assert missing.returncode == 3 and missing.stderr.strip() == f"pytest-trt: {tmp_path / 'nope.log'}: no such file"


def _retactic(src: Path, dst: Path, layer: str, tactic: str) -> tuple[str, str]:
    """The real log with ``layer``'s tactic in the layer listing replaced; (old, new) tactic as written."""
    lines = src.read_text().splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if (m := _LAYER_LINE.match(line)) and m["name"] == layer]
    assert len(hits) == 1, hits
    old = re.search(r"Tactic: (0x[0-9a-f]+)", lines[hits[0]])
    assert old is not None and old[1] != tactic
    lines[hits[0]] = lines[hits[0]].replace(f"Tactic: {old[1]}", f"Tactic: {tactic}")
    dst.write_text("".join(lines))
    return old[1], tactic


def test_log_diff_masks_tactics_unless_asked(tmp_path: Path) -> None:
    """Tactics change from run to run (timing): masked by default, listed and a difference with --tactics."""
    old, new = _retactic(MNIST_841, tmp_path / "new.log", "Conv-1 + ReLU-2", "0x1111111111111111")
    masked = cli("log", "diff", MNIST_841, tmp_path / "new.log")
    assert masked.returncode == 0, masked.stdout + masked.stderr
    assert masked.stdout.splitlines()[-1] == "build records match (1 tactic change(s) masked)"
    shown = cli("log", "diff", MNIST_841, tmp_path / "new.log", "--tactics")
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert shown.stdout.splitlines()[-2:] == ["tactic changes (1):", f"  Conv-1 + ReLU-2: {old} -> {new}"]
    doc = json.loads(cli("log", "diff", MNIST_841, tmp_path / "new.log", "--tactics", "--json").stdout)
    assert doc["diff"]["tactic_changes"] == [["Conv-1 + ReLU-2", old, new]] and not doc["identical"]


def test_log_diff_of_an_empty_warning(tmp_path: Path) -> None:
    """A builder warning with no text is a warning like any other: listed as an empty line, never a traceback."""
    log = tmp_path / "warned.log"
    log.write_text(MNIST_841.read_text() + "[08/17/2022-07:50:55] [W] [TRT] \n")
    run = cli("log", "diff", MNIST_841, log)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout.splitlines()[-2:] == ["new warnings (1):", "  "]
