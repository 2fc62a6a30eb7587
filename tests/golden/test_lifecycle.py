"""The five-step golden lifecycle through the full plugin and the ONNX Runtime backend.

1. no snapshot: fails with the command; 2. approved update writes; 3. check
passes; 4. a changed model fails with the regression lines; 5. approved
update again passes and the file keeps two generations.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_trt.golden.store import GoldenFile
from pytest_trt.options import APPROVE as APPROVE_OPTION
from pytest_trt.options import ENGINE_BUILD as ENGINE_BUILD_OPTION
from pytest_trt.options import UPDATE_GOLDEN as UPDATE_OPTION

if importlib.util.find_spec("pytest_trt.backends.onnxruntime") is None:  # pragma: no cover
    pytest.skip("the ONNX Runtime backend (pytest_trt.backends.onnxruntime) is not there yet", allow_module_level=True)
pytest.importorskip("onnxruntime")

HERE = Path(__file__).resolve().parent
RUN = ("--trt-backend", "onnxruntime", ENGINE_BUILD_OPTION)

TEST = f"""
import os, sys
from pathlib import Path
sys.path.insert(0, {str(HERE)!r})
import numpy as np
import pytest
from golden_engines import write_model
from pytest_trt import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset

SCALE = float(os.environ.get("TINY_SCALE", "1.0"))
MODEL = write_model(Path(__file__).parent / f"tiny-{{SCALE}}.onnx", scale=SCALE)
TINY = BuildConfig(name="tiny", onnx=MODEL, profiles=[Profile(x=((1, 8), (16, 8), (16, 8)))])
X = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
DATASET = GoldenDataset.from_arrays({{"x": X}}, labels=np.arange(64) % 5, tags=["edge"] * 8 + [""] * 56)

@pytest.mark.trt(TINY)
def test_tiny(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATASET, l2_delta=0.05, top1_drop=0.005)
"""


def test_five_step_lifecycle(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_tiny=TEST)
    golden = pytester.path / "golden" / "tiny.h5"

    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no golden for 'tiny'*", f"*{UPDATE_OPTION} {APPROVE_OPTION} \"REASON\"*"])
    assert not golden.exists()

    result = pytester.runpytest(*RUN, UPDATE_OPTION, APPROVE_OPTION, "first golden, CR-1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*trt goldens refreshed*", "*generation 1: new snapshot*"])

    pytester.runpytest(*RUN).assert_outcomes(passed=1)

    monkeypatch.setenv("TINY_SCALE", "1.18")
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*"])

    result = pytester.runpytest(*RUN, UPDATE_OPTION, APPROVE_OPTION, "retrained, CR-2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*generation 2: logits: L2 delta 0.18*"])
    pytester.runpytest(*RUN).assert_outcomes(passed=1)
    with GoldenFile(golden) as g:
        assert [h.generation for h in g.history("tiny")] + [g["tiny"].generation] == [1, 2]
        assert [a["reason"] for a in g.approvals()] == ["first golden, CR-1", "retrained, CR-2"]
        assert g["tiny"].provenance.backend == "onnxruntime"
