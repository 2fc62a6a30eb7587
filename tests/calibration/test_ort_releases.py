"""INT8 calibration on every onnxruntime release the pins allow (``tox -e int8-oldest`` runs this on the oldest).

The calibrator's API is probed, not versioned: ``create_calibrator`` took no ``providers`` keyword up to
1.20.x.  Releases before 1.20 are refused with the reason (their quantizer scales a Conv output ahead of
its ReLU6 with the Conv's own range).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx  # noqa: F401 - imported before any pytester snapshot of sys.modules
import pytest

from pytest_trt.testing.models import write_classifier
from tests.conftest import needs_ort

pytestmark = needs_ort


@pytest.fixture
def classifier(tmp_path: Path) -> Path:
    return write_classifier(tmp_path / "classifier.onnx", argmax=False)


def _batches() -> list[dict[str, np.ndarray]]:
    x = np.random.default_rng(7).standard_normal((12, 8)).astype(np.float32)
    return [{"x": x[i:i + 4]} for i in range(0, 12, 4)]


def _numpy_amax(model: Path) -> dict[str, float]:
    """max |t| of every activation, computed by numpy from the model's weights (not by onnxruntime)."""
    from onnx import numpy_helper

    weights = {i.name: numpy_helper.to_array(i) for i in onnx.load(str(model)).graph.initializer}
    x = np.concatenate([b["x"] for b in _batches()])
    h = x @ weights["w1"]
    hr = np.maximum(h, 0)
    logits = hr @ weights["w2"]
    return {name: float(np.abs(t).max()) for name, t in {"x": x, "h": h, "hr": hr, "logits": logits}.items()}


def test_minmax_ranges_are_the_activations_max_abs(classifier: Path) -> None:
    from pytest_trt.calibration.ranges import compute_ranges

    ranges = compute_ranges(classifier, _batches(), "minmax")
    expected = _numpy_amax(classifier)
    assert {name: ranges.amax(name) for name in expected} == pytest.approx(expected, rel=1e-5)


def test_a_calibrator_without_a_providers_keyword_is_used_as_it_is(
    classifier: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create_calibrator`` as onnxruntime 1.16 to 1.20.1 declare it: no ``providers`` parameter."""
    from onnxruntime.quantization import calibrate

    from pytest_trt.calibration.ranges import compute_ranges

    real = calibrate.create_calibrator
    calls: list[dict[str, object]] = []

    def create_calibrator(model, op_types_to_calibrate=None, augmented_model_path="augmented_model.onnx",  # type: ignore[no-untyped-def]
                          calibrate_method=calibrate.CalibrationMethod.MinMax, use_external_data_format=False,
                          extra_options={}):  # noqa: B006 - onnxruntime's own signature
        calls.append(dict(extra_options))
        return real(model, op_types_to_calibrate, augmented_model_path=augmented_model_path,
                    calibrate_method=calibrate_method, use_external_data_format=use_external_data_format,
                    extra_options=extra_options)

    monkeypatch.setattr(calibrate, "create_calibrator", create_calibrator)
    ranges = compute_ranges(classifier, _batches(), "minmax")
    assert len(calls) == 1
    assert ranges.amax("logits") == pytest.approx(_numpy_amax(classifier)["logits"], rel=1e-5)


def test_a_release_before_1_20_is_refused_with_the_reason(
    incident_configs, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    import onnxruntime

    from pytest_trt.calibration.explicit import calibrate_explicit
    from pytest_trt.errors import BackendUnavailable

    approved, _ = incident_configs
    monkeypatch.setattr(onnxruntime, "__version__", "1.19.2")
    with pytest.raises(BackendUnavailable) as info:
        calibrate_explicit(approved)
    assert info.value.message == (
        "BuildConfig 'digits_mnet': INT8 calibration needs onnxruntime >= 1.20, installed 1.19.2: older quantizers "
        "scale a Conv's output ahead of its ReLU6 (Clip) with the Conv's own range instead of the activation's, as "
        "TensorRT's fused Conv+ReLU6 does. pip install 'onnxruntime>=1.20' (or 'pytest-trt[int8]')")
