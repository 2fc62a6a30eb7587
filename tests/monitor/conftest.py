"""Fixtures of the monitor tests: the digits incident's approved golden and both engines' outputs, made once.

``digits`` runs ``digits_run.py`` in a pytest subprocess on the ONNX Runtime backend (the plugin builds and
calibrates the entropy and min-max INT8 engines, approves the entropy golden), then writes the monitor spec with
the real command.  About 20 s, once per session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import HAS_ORT

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("digits_run.py")


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``pytest-trt ARGS`` in a subprocess (this interpreter, this checkout first on the path)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "import sys; from pytest_trt.cli import main; sys.exit(main())",
                           *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@dataclass(frozen=True)
class Digits:
    golden: Path  # golden/digits_mnet.h5, the entropy engine approved
    spec: Path  # digits.monitor.json written by `pytest-trt monitor spec`
    entropy: np.ndarray  # the approved engine's logits on the 597 golden images
    minmax: np.ndarray  # the min-max engine's logits on the same images


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Digits:
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed (pip install 'pytest-trt[ort]'): it runs the digits engines")
    from examples.calibration.incident import write_calibration_set

    work = tmp_path_factory.mktemp("digits-monitor")
    calib = write_calibration_set(work / "calibration.npz")
    (work / "test_digits_run.py").write_text(RUNNER.read_text())
    (work / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "MONITOR_DIGITS_CALIBRATION": str(calib), "MONITOR_DIGITS_OUT": str(work),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_digits_run.py",
         "--trt-backend", "onnxruntime", "--trt-engine-build", "--trt-update-golden",
         "--trt-approve", "entropy calibration approved, CR-7", f"--trt-cache-dir={work / 'cache'}",
         f"--trt-golden-dir={work / 'golden'}", f"--trt-bundle-dir={work / 'bundles'}"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    golden, spec = work / "golden" / "digits_mnet.h5", work / "digits.monitor.json"
    made = cli("monitor", "spec", golden, "-o", spec)
    assert made.returncode == 0, made.stderr
    return Digits(golden, spec, np.load(work / "entropy.npy"), np.load(work / "minmax.npy"))
