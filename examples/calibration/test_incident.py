"""The incident as a user's regression test would catch it.

``DIGITS_CALIBRATION=minmax`` plays the upgrade that switched the calibrator.
Run ``pytest --trt-backend onnxruntime --trt-engine-build examples/calibration``
once with ``--trt-update-golden --trt-approve "REASON"`` to approve the entropy
engine, then without: the approved engine passes; with the switch, both tests fail.
"""

from __future__ import annotations

import os

import pytest

from examples.calibration.incident import configs, golden_dataset
from pytest_trt import EngineNotRunnable, assert_calibration

APPROVED, UPGRADED = configs()
DEPLOYED = UPGRADED if os.environ.get("DIGITS_CALIBRATION") == "minmax" else APPROVED


@pytest.mark.trt(DEPLOYED)
def test_calibration_is_the_approved_algorithm(trt_engine):
    # catches the switch from the build evidence alone, before any output is compared
    assert_calibration("entropy")


@pytest.mark.trt(DEPLOYED)
def test_accuracy_has_not_dropped(trt_engine, trt_golden):
    try:
        assert trt_engine.runner is not None  # TensorRT-RTX builds here; it runs engines only on a supported GPU
    except EngineNotRunnable as exc:
        pytest.skip(str(exc))
    trt_golden.check(trt_engine, dataset=golden_dataset(), top1_drop=0.02, l2_delta=None, structure="ignore")
