"""Regenerate ``examples/upgrade/example-report.html``, the upgrade review users see in the README.

    python examples/upgrade/example_report.py [WORKDIR]

OLD: the committed TensorRT-RTX 1.4 bundles (tests/data/upgrade/rtx14, copied to WORKDIR/rtx14; with the Q/DQ build
failure) plus an ONNX Runtime run of examples/upgrade checked against goldens approved just before.
NEW: the example suite built now with the installed TensorRT-RTX, plus the same ONNX Runtime check
on a copy of the model whose ``block3/conv_project`` weights are scaled by 3 (a planted regression),
localized with ``--localize``.  Needs tensorrt-rtx and onnxruntime.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.upgrade.planted import PLANTED_SUITE, write_planted  # noqa: E402


def pytest(*args: str | Path) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "trt_bundle_engine=false",
           *map(str, args)]
    subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)


def main() -> None:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="pytest-trt-example-"))
    shutil.rmtree(work, ignore_errors=True)
    golden = work / "golden"
    ort = ("--trt-backend=onnxruntime", "--trt-engine-build", f"--trt-golden-dir={golden}")
    pytest("--trt-backend=tensorrt-rtx", "--trt-engine-build", f"--trt-bundle-dir={work / 'rtx'}",
           "examples/test_mobilenet.py", "examples/upgrade")
    pytest(*ort, "--trt-update-golden", "--trt-approve=example approval", f"--trt-bundle-dir={work / 'approve'}",
           "examples/upgrade/test_upgrade_ort.py")
    pytest(*ort, f"--trt-bundle-dir={work / 'ort-old'}", "examples/upgrade/test_upgrade_ort.py")
    suite = work / "planted" / "test_upgrade_ort.py"
    suite.parent.mkdir(parents=True)
    suite.write_text(PLANTED_SUITE.format(model=str(write_planted(work / "planted" / "model.onnx"))))
    pytest(*ort, f"--trt-bundle-dir={work / 'ort-new'}", suite)
    # run from WORKDIR with relative folders: the report shows them as given and the bundles by file name, so no
    # absolute path of this machine (/tmp/..., the checkout) ends up in the committed example
    shutil.copytree(ROOT / "tests" / "data" / "upgrade" / "rtx14", work / "rtx14")
    out = ROOT / "examples" / "upgrade" / "example-report.html"
    subprocess.run([sys.executable, "-m", "pytest_trt.cli", "upgrade-report", "rtx14,ort-old", "rtx,ort-new",
                    "--localize", "-o", out], cwd=work, check=False)


if __name__ == "__main__":
    main()
