"""The incident end to end, through the plugin: approve the entropy engine, then the switch to min-max fails.

Runs the real example (examples/calibration/test_incident.py) with pytester on the ONNX Runtime backend, with
the engine cache (and so the calibration store) shared with the other calibration tests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import h5py  # noqa: F401 - imported before pytester's in-process runs, which cannot load C extensions twice
import numpy  # noqa: F401
import onnx  # noqa: F401
import pytest

from pytest_trt.options import APPROVE as APPROVE_OPTION
from pytest_trt.options import BUNDLE_DIR
from pytest_trt.options import ENGINE_BUILD as ENGINE_BUILD_OPTION
from pytest_trt.options import UPDATE_GOLDEN as UPDATE_OPTION
from tests.conftest import needs_ort

pytestmark = needs_ort
ort = pytest.importorskip("onnxruntime")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "calibration" / "test_incident.py"


def test_the_incident_is_caught(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                shared_cache_dir: Path) -> None:
    pytester.makepyfile(test_digits_incident=EXAMPLE.read_text())
    run = ("-p", "no:cacheprovider", "--trt-backend", "onnxruntime", ENGINE_BUILD_OPTION,
           "--trt-cache-dir", str(shared_cache_dir), "--trt-golden-dir", str(pytester.path / "golden"),
           BUNDLE_DIR, str(pytester.path / "trt-bundles"))
    monkeypatch.delenv("DIGITS_CALIBRATION", raising=False)
    pytester.runpytest(*run, UPDATE_OPTION, APPROVE_OPTION, "entropy calibration approved, CR-7").assert_outcomes(passed=2)

    # a second session pays nothing: the engine comes from the cache
    result = pytester.runpytest(*run)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["digits_mnet v1.0.0 * cached *onnxruntime*"])
    # the audit bundle carries the calibration cache the build made, and the Q/DQ model's hash
    import tarfile

    (bundle,) = (pytester.path / "trt-bundles").glob("digits_mnet-*.tar.gz")
    with tarfile.open(bundle) as tar:
        cache = tar.extractfile("calibration.cache").read().decode()  # type: ignore[union-attr]
        calib = json.loads(tar.extractfile("calibration.json").read())  # type: ignore[union-attr]
    assert cache.startswith("TRT-0000-EntropyCalibration\n/Flatten_output_0: ")
    assert calib["cache_sha256"] == hashlib.sha256(cache.encode()).hexdigest() and len(calib["qdq_model_sha256"]) == 64

    monkeypatch.setenv("DIGITS_CALIBRATION", "minmax")  # the upgrade switched the calibrator
    result = pytester.runpytest(*run)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*expected INT8 calibration with 'entropy' (EntropyCalibration), got 'minmax'*",
        "*calibration cache header: 'TRT-0000-MinMaxCalibration' -> minmax*",
    ])
    result.stdout.re_match_lines([r".*\[REGRESSION\] logits: Top-1 Acc drop: -\d+\.\d% < threshold\(-2\.0%\) "
                                  r"\(accuracy 9\d\.\d% -> \d+\.\d%, 597 labelled samples\)"])
    drop = next(line for line in result.outlines if "Top-1 Acc drop" in line)
    assert float(drop.split("Top-1 Acc drop: ")[1].split("%")[0]) <= -5.0  # material: several points of top-1
