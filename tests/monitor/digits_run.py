"""Run by tests/monitor/conftest.py in a pytest subprocess: approve the digits entropy golden, save both engines'
outputs on the golden set (the entropy engine is the approved one, min-max the upgrade of the incident)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from examples.calibration.incident import configs, golden_dataset

APPROVED, UPGRADED = configs(Path(os.environ["MONITOR_DIGITS_CALIBRATION"]))
OUT = Path(os.environ["MONITOR_DIGITS_OUT"])
DATA = golden_dataset()


@pytest.mark.trt(APPROVED)
def test_entropy(trt_engine, trt_golden):  # type: ignore[no-untyped-def]
    trt_golden.check(trt_engine, dataset=DATA, top1_drop=0.02, l2_delta=None, structure="ignore")
    np.save(OUT / "entropy.npy", trt_engine.run(DATA.inputs)["logits"])


@pytest.mark.trt(UPGRADED)
def test_minmax(trt_engine):  # type: ignore[no-untyped-def]
    np.save(OUT / "minmax.npy", trt_engine.run(DATA.inputs)["logits"])
