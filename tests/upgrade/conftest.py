"""Real runs of the example suite in subprocesses, producing bundle folders for the upgrade report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_ORT, HAS_RTX

ROOT = Path(__file__).resolve().parents[2]
#: TensorRT-RTX 1.4 bundles (engine hash only) and the Q/DQ build-failure note, made with
#: ``pytest --trt-backend tensorrt-rtx --trt-engine-build --trt-bundle-dir tests/data/upgrade/rtx14
#: -o trt_bundle_engine=false examples/test_mobilenet.py examples/upgrade`` in a tensorrt-rtx==1.4.0.76 venv
RTX14_FIXTURE = ROOT / "tests" / "data" / "upgrade" / "rtx14"
#: an interpreter with tensorrt-rtx==1.4.0.76 and this package installed, for live 1.4 builds
RTX14_PYTHON = os.environ.get("PYTEST_TRT_RTX14_PYTHON", "")


def run_examples(python: str, out: Path, *args: str, backend: str = "tensorrt-rtx",
                 paths: tuple[str, ...] = ("examples/test_mobilenet.py", "examples/upgrade")) -> Path:
    """Run the example suite with ``python`` (a real pytest subprocess); return its bundle folder."""
    bundles = out / "bundles"
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--trt-backend={backend}", "--trt-engine-build",
           f"--trt-bundle-dir={bundles}", f"--trt-cache-dir={out / 'cache'}", "-o", "trt_bundle_engine=false",
           *args, *paths]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if run.returncode not in (0, 1):
        raise AssertionError(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    return bundles


@pytest.fixture(scope="session")
def rtx_new(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bundles of the example suite built now with the installed TensorRT-RTX."""
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed")
    return run_examples(sys.executable, tmp_path_factory.mktemp("rtx_new"))


@pytest.fixture(scope="session")
def rtx14_live(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bundles of the example suite built now by TensorRT-RTX 1.4 in its own interpreter."""
    if not RTX14_PYTHON or not Path(RTX14_PYTHON).is_file():
        pytest.skip("set PYTEST_TRT_RTX14_PYTHON to a python with tensorrt-rtx==1.4.0.76 and pytest-trt installed "
                    "(e.g. python -m venv v14 && v14/bin/pip install -e . tensorrt-rtx==1.4.0.76 onnxruntime)")
    return run_examples(RTX14_PYTHON, tmp_path_factory.mktemp("rtx14"))


@pytest.fixture(scope="session")
def ort_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Goldens approved, then a checking run of the ONNX Runtime examples, and a copy of it: bundle folders."""
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed")
    base = tmp_path_factory.mktemp("ort")
    golden = base / "golden"
    common = (f"--trt-golden-dir={golden}",)
    paths = ("examples/upgrade/test_upgrade_ort.py",)
    run_examples(sys.executable, base / "approve", *common, "--trt-update-golden", "--trt-approve=first approval",
                 backend="onnxruntime", paths=paths)
    old = run_examples(sys.executable, base / "old", *common, backend="onnxruntime", paths=paths)
    return old, copy_run(old, base / "twin"), golden


@pytest.fixture(scope="session")
def ort_planted(ort_runs: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A NEW run of the labelled check on the planted-regression model, against the same approved golden."""
    from tests.upgrade.planted import PLANTED_SUITE, write_planted

    base = tmp_path_factory.mktemp("planted")
    model = write_planted(base / "mobilenet_v2_planted.onnx")
    suite = base / "suite" / "test_upgrade_ort.py"
    suite.parent.mkdir()
    suite.write_text(PLANTED_SUITE.format(model=str(model)))
    return run_examples(sys.executable, base / "run", f"--trt-golden-dir={ort_runs[2]}", backend="onnxruntime",
                        paths=(str(suite),))


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".*"))
    return dst


def _digits_run(out: Path, bundles: str, *args: str, calibration: str = "entropy") -> Path:
    """One real pytest run of examples/calibration on ONNX Runtime (``calibration``: the deployed algorithm)."""
    env = {**os.environ, "DIGITS_CALIBRATION": calibration}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--trt-backend=onnxruntime",
           "--trt-engine-build", f"--trt-cache-dir={out / 'cache'}", f"--trt-golden-dir={out / 'golden'}",
           f"--trt-bundle-dir={out / bundles}", *args, "examples/calibration"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    if run.returncode not in (0, 1):
        raise AssertionError(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-2000:]}")
    return out / bundles


@pytest.fixture(scope="session")
def digits_incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The calibration incident as bundle folders: ``old`` (entropy, approved then checked), ``new`` (min-max,
    both tests failing), ``unchecked`` (min-max, only the test that fails before any golden check), and the
    ``golden`` and ``cache`` folders of the runs."""
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed")
    out = tmp_path_factory.mktemp("digits")
    _digits_run(out, "old", "--trt-update-golden", "--trt-approve=CR-1")
    old = _digits_run(out, "old")
    new = _digits_run(out, "new", calibration="minmax")
    unchecked = _digits_run(out, "unchecked", "-k", "calibration_is", calibration="minmax")
    return {"old": old, "new": new, "unchecked": unchecked, "golden": out / "golden", "cache": out / "cache"}


def bundle_doc(folder: Path, member: str) -> dict:
    """One JSON member of the one bundle in ``folder``, read with tarfile (not the code under test)."""
    import json
    import tarfile

    (path,) = folder.glob("*.tar.gz")
    with tarfile.open(path) as tar:
        f = tar.extractfile(member)
        assert f is not None
        return dict(json.loads(f.read()))
