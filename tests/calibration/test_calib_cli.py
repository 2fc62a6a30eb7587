"""``pytest-trt calib show`` / ``calib diff`` in a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
OLD = DATA / "calib_trt8.2.4_entropy2_cookbook_plugin.cache"
NEW = DATA / "calib_trt10.6.0_entropy2_cookbook_plugin.cache"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *args], capture_output=True, text=True, check=False)


def test_calib_show_and_diff(tmp_path: Path) -> None:
    shown = cli("calib", "show", str(OLD))
    assert shown.returncode == 0
    assert "header: TRT-8204-EntropyCalibration2 (TensorRT 8.2.4, EntropyCalibration2)" in shown.stdout
    assert "tensors: 3" in shown.stdout
    diff = cli("calib", "diff", str(OLD), str(NEW), "--json")
    assert diff.returncode == 1
    doc = json.loads(diff.stdout)
    assert doc["version_changed"] and not doc["algorithm_changed"] and doc["added"] == [
        "(Unnamed Layer* 0) [PluginV2DynamicExt]_output", "outputT0"]
    assert cli("calib", "diff", str(OLD), str(OLD)).returncode == 0
    bad = tmp_path / "bad.cache"
    bad.write_text("TRT-8601-EntropyCalibration2\nx 3f800000\n")
    broken = cli("calib", "show", str(bad))
    assert broken.returncode == 3 and f"{bad}:2: 'x 3f800000'" in broken.stderr
    assert cli("calib", "show", str(tmp_path / "none.cache")).returncode == 3
