"""One bundle schema across backends, and golden verdict changes in ``bundle diff``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from pytest_trt.audit.profiles import normalized_effective, profile_shapes
from tests.upgrade.conftest import ROOT

#: the example MobileNetV2's profile (examples/test_mobilenet.py and examples/upgrade/test_upgrade_ort.py)
EXAMPLE_PROFILE = {"input": {"min": [1, 3, 32, 32], "opt": [8, 3, 32, 32], "max": [32, 3, 32, 32]}}


def _config(bundle: Path) -> dict:
    with tarfile.open(bundle) as tar:
        return json.load(tar.extractfile("config.json"))  # type: ignore[arg-type]


def test_profile_shapes_both_spellings() -> None:
    assert profile_shapes([[1, 2], [3, 4], [5, 6]]) == {"min": [1, 2], "opt": [3, 4], "max": [5, 6]}
    assert profile_shapes({"min": [1], "opt": [2], "max": [3]}) == {"min": [1], "opt": [2], "max": [3]}
    eff = {"profiles": [{"x": [[1], [2], [3]]}], "flags": ["A"]}
    assert normalized_effective(eff) == {"profiles": [{"x": {"min": [1], "opt": [2], "max": [3]}}], "flags": ["A"]}
    assert eff["profiles"][0]["x"] == [[1], [2], [3]]  # the result itself is left as the backend gave it


def test_rtx_and_onnxruntime_bundles_write_one_profile_format(rtx_new: Path,
                                                             ort_runs: tuple[Path, Path, Path]) -> None:
    rtx = _config(rtx_new / "mobilenet_v2-v1.0.0-rtx1.7-cpu-aot.tar.gz")
    ort = _config(next(ort_runs[0].glob("mobilenet_v2_labelled_ort-*.tar.gz")))
    assert rtx["effective"]["profiles"] == [EXAMPLE_PROFILE] == ort["effective"]["profiles"]
    assert rtx["pinned"]["profiles"] == [EXAMPLE_PROFILE]


def test_bundle_diff_shows_golden_verdict_changes(ort_runs: tuple[Path, Path, Path], ort_planted: Path) -> None:
    old = next(ort_runs[0].glob("mobilenet_v2_labelled_ort-*.tar.gz"))
    new = next(ort_planted.glob("mobilenet_v2_labelled_ort-*.tar.gz"))
    run = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "bundle", "diff", old, new, "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    rows = {r["path"]: (r["old"], r["new"]) for r in json.loads(run.stdout)["golden"]}
    old_id = "examples/upgrade/test_upgrade_ort.py::test_labelled_outputs_match_golden"
    assert rows.pop(old_id) == ("pass", None)
    # the planted run's test (another file) on another model: its provenance differs, so (policy "compare")
    # the thresholds decide, and the planted change breaches them
    assert list(rows.values()) == [(None, "fail")]
    text = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "bundle", "diff", old, new], cwd=ROOT,
                          capture_output=True, text=True, timeout=120).stdout
    assert "golden verdicts: 2 differences" in text
    seconds = [line for line in text.splitlines() if line.startswith("build seconds")]
    numbers = re.findall(r"\d[\d.e+-]*\d", seconds[0])
    assert numbers and all(n == f"{float(n):.6g}" for n in numbers), seconds  # 6 significant digits at most
