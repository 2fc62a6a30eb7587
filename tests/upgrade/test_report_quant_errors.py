"""Per-tensor quantization errors of the regressed INT8 config in the upgrade review, against ``calib errors``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.upgrade.conftest import ROOT
from tests.upgrade.test_report import cli


def test_quant_errors_match_calib_errors(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    golden = digits_incident["golden"] / "digits_mnet.h5"
    calib = cli("calib", "errors", ROOT / "examples" / "calibration" / "pins.toml", "digits_mnet", "--golden", golden,
                "--json")
    assert calib.returncode == 0, calib.stderr
    top = json.loads(calib.stdout)["tensors"][0]
    run = cli("upgrade-report", digits_incident["old"], digits_incident["new"], "--json", "-o", tmp_path / "r.html")
    (config,) = json.loads(run.stdout)["configs"]
    qe = config["quant_errors"]
    assert qe["computed"] is True and qe["samples"] == 64
    assert qe["tensors"][0]["tensor"] == top["tensor"]
    assert qe["tensors"][0]["old_db"] is not None and qe["tensors"][0]["old_db"] > qe["tensors"][0]["new_db"]
    assert qe["search"] == f"pytest-trt calib search PINS.toml digits_mnet --golden {golden}"
    html = (tmp_path / "r.html").read_text()
    assert "quantization errors (64 golden samples" in html and " dB" in html
    skipped = cli("upgrade-report", digits_incident["old"], digits_incident["new"], "--json", "--no-html",
                  "--no-quant-errors")
    assert json.loads(skipped.stdout)["configs"][0]["quant_errors"] is None
