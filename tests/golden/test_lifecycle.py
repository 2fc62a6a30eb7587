"""The five-step golden lifecycle through the full plugin and the ONNX Runtime backend.

1. no snapshot: fails with the command; 2. approved update writes; 3. check
passes; 4. a changed model fails with the regression lines; 5. approved
update again passes and the file keeps two generations.
"""

from __future__ import annotations

import importlib.util

import pytest

from pytest_trt.golden.store import GoldenFile
from pytest_trt.options import APPROVE as APPROVE_OPTION
from pytest_trt.options import ENGINE_BUILD as ENGINE_BUILD_OPTION
from pytest_trt.options import UPDATE_GOLDEN as UPDATE_OPTION
from pytest_trt.testing import GoldenLifecycle

if importlib.util.find_spec("pytest_trt.backends.onnxruntime") is None:  # pragma: no cover
    pytest.skip("the ONNX Runtime backend (pytest_trt.backends.onnxruntime) is not there yet", allow_module_level=True)
pytest.importorskip("onnxruntime")

RUN = ("--trt-backend", "onnxruntime", ENGINE_BUILD_OPTION)

TEST = """
import os
from pathlib import Path
import numpy as np
import pytest
from pytest_trt.testing import write_classifier
from pytest_trt import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset

SCALE = float(os.environ.get("TINY_SCALE", "1.0"))
MODEL = write_classifier(Path(__file__).parent / f"tiny-{SCALE}.onnx", scale=SCALE)
TINY = BuildConfig(name="tiny", onnx=MODEL, profiles=[Profile(x=((1, 8), (16, 8), (16, 8)))])
X = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
DATASET = GoldenDataset.from_arrays({"x": X}, labels=np.arange(64) % 5, tags=["edge"] * 8 + [""] * 56)

@pytest.mark.trt(TINY)
def test_tiny(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATASET, l2_delta=0.05, top1_drop=0.005)
"""


def test_five_step_lifecycle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_tiny=TEST)
    life = GoldenLifecycle(pytester, *RUN, golden="golden/tiny.h5")
    command = life.first_run()
    assert command[-3:] == [UPDATE_OPTION, APPROVE_OPTION, "REASON"]
    life.approve("first golden, CR-1").stdout.fnmatch_lines(["*generation 1: new snapshot*"])
    life.check()
    monkeypatch.setenv("TINY_SCALE", "1.18")
    life.regression("*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*")
    life.approve("retrained, CR-2").stdout.fnmatch_lines(["*generation 2: logits: L2 delta 0.18*"])
    life.check()
    with GoldenFile(pytester.path / "golden" / "tiny.h5") as g:
        assert [h.generation for h in g.history("tiny")] + [g["tiny"].generation] == [1, 2]
        assert [a["reason"] for a in g.approvals()] == ["first golden, CR-1", "retrained, CR-2"]
        assert g["tiny"].provenance.backend == "onnxruntime"
