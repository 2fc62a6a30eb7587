"""examples/ is part of the README's test command: run it in a subprocess with every backend installed here.

The README's headline test (module-level ``assert_no_fusion`` and ``trt_engine.assert_fused``)
is examples/test_mobilenet.py; deleting or breaking that API fails this test, not only a
manual run of examples/.  The copy runs in a temporary folder, so its cache, goldens and
bundles never land in the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_ORT, HAS_RTX

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", "examples", "--trt-engine-build", "-p", "no:cacheprovider", "-rA",
           "--trt-cache-dir", str(folder / "cache"), *args]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=300)


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("models", "__pycache__"))
    return tmp_path


@pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
def test_examples_pass_on_tensorrt_rtx(examples_copy: Path) -> None:
    out = _run(examples_copy, "--trt-backend", "tensorrt-rtx")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    for test in ("test_dynamic_batch_engine_fuses_depthwise_conv_with_relu6", "test_effective_config_is_the_pin",
                 "test_fixed_batch_engine_log_names_every_onnx_layer"):
        assert f"PASSED examples/test_mobilenet.py::{test}" in out.stdout
    assert "failed" not in out.stdout.splitlines()[-1]


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")
def test_examples_pass_on_onnxruntime_after_the_first_approval(examples_copy: Path) -> None:
    missing = _run(examples_copy, "--trt-backend", "onnxruntime")
    assert missing.returncode == 1 and "no golden for 'mobilenet_v2_ort'" in missing.stdout  # never silent
    approve = _run(examples_copy, "--trt-backend", "onnxruntime", "--trt-update-golden", "--trt-approve", "CI copy")
    assert approve.returncode == 0, approve.stdout[-4000:]
    out = _run(examples_copy, "--trt-backend", "onnxruntime")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "PASSED examples/test_onnxruntime.py::test_outputs_match_the_approved_golden" in out.stdout


def test_examples_collect_without_hypothesis(examples_copy: Path) -> None:
    """The README's first quick-start command installs only `.[rtx,ort,attest]`: no example module may need the test extra."""
    blocker = examples_copy / "no_hypothesis"
    (blocker / "hypothesis").mkdir(parents=True)
    (blocker / "hypothesis" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'hypothesis'\", name='hypothesis')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-m", "pytest", "examples", "--collect-only", "-q", "-rs",
                          "-p", "no:cacheprovider", "-p", "no:hypothesispytest"], cwd=examples_copy, capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "needs hypothesis: pip install 'pytest-trt[hypothesis]'" in out.stdout
