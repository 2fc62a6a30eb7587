"""``--trt-approve-report`` in APPROVALS.jsonl and the golden's history; build-failure notes; Chromium rendering."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_ORT, needs_rtx
from tests.upgrade.conftest import ROOT, run_examples

LABELLED = "examples/upgrade/test_upgrade_ort.py::test_labelled_outputs_match_golden"


@pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed")
def test_approve_report_sha256_is_recorded(tmp_path: Path) -> None:
    report = tmp_path / "review.html"
    report.write_bytes(b"<!DOCTYPE html><html><body>upgrade review</body></html>\n")
    want = hashlib.sha256(report.read_bytes()).hexdigest()
    golden = tmp_path / "golden"
    run_examples(sys.executable, tmp_path / "run", f"--trt-golden-dir={golden}", "--trt-update-golden",
                 "--trt-approve=onnxruntime upgrade, CR-7", f"--trt-approve-report={report}",
                 backend="onnxruntime", paths=(LABELLED,))
    approvals = [json.loads(line) for line in (golden / "APPROVALS.jsonl").read_text().splitlines()]
    assert [a["report"] for a in approvals] == [{"path": str(report), "sha256": want}]
    shown = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "golden", "show", "--json",
                            golden / "mobilenet_v2_labelled_ort.h5"], capture_output=True, text=True, check=True)
    history = json.loads(shown.stdout)["approvals"]
    assert want in json.dumps(history)


def test_approve_report_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--trt-update-golden",
                          "--trt-approve=x", f"--trt-approve-report={tmp_path / 'nope.html'}", "--collect-only",
                          "examples/test_mobilenet.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 4
    assert f"--trt-approve-report {tmp_path / 'nope.html'}: cannot read the report" in run.stderr


@needs_rtx
def test_failed_build_leaves_a_note_the_report_reads(pytester: pytest.Pytester, tmp_path: Path) -> None:
    (pytester.path / "broken.onnx").write_bytes(b"not an onnx model")
    pytester.makepyfile(test_broken="""
        import pytest
        from pytest_trt import BuildConfig
        @pytest.mark.trt(BuildConfig(name="broken", version="2.0", onnx="broken.onnx"))
        def test_build(trt_engine):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-backend=tensorrt-rtx",
                                           "--trt-engine-build", f"--trt-bundle-dir={tmp_path / 'b'}")
    result.assert_outcomes(errors=1)
    notes = list((tmp_path / "b").glob("*.build-failed.json"))
    assert [n.name for n in notes] == ["broken-v2.0-tensorrt-rtx.build-failed.json"]
    note = json.loads(notes[0].read_text())
    assert note["config"] == {"name": "broken", "version": "2.0"} and note["stage"] in ("parse", "build")
    assert note["test"] == "test_broken.py::test_build"


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    from tests.upgrade.conftest import RTX14_FIXTURE

    html = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "pytest_trt.cli", "upgrade-report", RTX14_FIXTURE, RTX14_FIXTURE,
                    "-o", html], cwd=ROOT, capture_output=True, check=False, timeout=120)
    shot = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1000,800", html.as_uri()], capture_output=True, timeout=120, check=False)
    image = pytest.importorskip("matplotlib.image", reason="matplotlib (the [docs] extra) reads the screenshot")
    pixels = image.imread(shot)
    assert pixels.shape[:2] == (800, 1000)
    # rendered text, not a blank page: a fair share of dark pixels on the white background
    dark = (pixels[..., :3].mean(axis=-1) < 0.5).mean()
    assert dark > 0.005, f"the screenshot is nearly blank ({dark:.4f} dark pixels)"


@needs_rtx
def test_config_the_release_refuses_leaves_a_note(pytester: pytest.Pytester, tmp_path: Path, models) -> None:
    """A release that refuses a config (TensorRT-RTX 1.4 and INT8 Q/DQ; here fp16, which no TensorRT-RTX has) could
    not build it: the upgrade report must say so, not list the config as only in NEW."""
    pytester.makepyfile(test_fp16=f"""
        import pytest
        from pytest_trt import BuildConfig
        @pytest.mark.trt(BuildConfig(name="half", version="1.0", onnx={str(models["conv_bn_relu"])!r}, precision="fp16"))
        def test_build(trt_engine):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-backend=tensorrt-rtx",
                                           "--trt-engine-build", f"--trt-bundle-dir={tmp_path / 'b'}")
    result.assert_outcomes(errors=1)
    [note_path] = (tmp_path / "b").glob("*.build-failed.json")
    note = json.loads(note_path.read_text())
    assert note_path.name == "half-v1.0-tensorrt-rtx.build-failed.json"
    assert note["stage"].startswith("refused option precision") and "fp16" in note["message"]
