"""No silent thresholds, the typed verdict, provenance notes, drift floor: real ONNX Runtime builds.

The "25 % of top-1 answers changed" engine: each golden sample scores its
class ``i % 4`` at 1.0 and the next class at 0.99.  The changed model damps
class 0's score to 0.98, so exactly the 16 of 64 samples whose top class is 0
change their answer (to the runner-up); the 16 whose runner-up is class 0
move by 0.0198 without changing.  The relative L2 delta stays
``sqrt((16 * 0.02**2 + 16 * 0.0198**2) / (64 * (1 + 0.99**2))) = 0.0100``: far under 0.05.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from golden_engines import real_engine, write_topk_model

from pytest_trt.config import BuildConfig, Profile
from pytest_trt.errors import GoldenTainted
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, GoldenRegression, UpdateResult

pytest.importorskip("onnxruntime")

MakeGolden = Callable[..., GoldenCheck]
N, C = 64, 4


def _config(model_dir: Path, damp: float) -> BuildConfig:
    path = write_topk_model(model_dir / f"topk-{damp}.onnx", classes=C, damp=damp)
    return BuildConfig(name="topk", onnx=path, profiles=(Profile(x=((1, C), (16, C), (16, C))),))


def _unlabelled() -> GoldenDataset:
    x = np.zeros((N, C), np.float32)
    top = np.arange(N) % C
    x[np.arange(N), top] = 1.0
    x[np.arange(N), (top + 1) % C] = 0.99
    return GoldenDataset.from_arrays({"x": x})


@pytest.fixture
def approved(golden: MakeGolden, model_dir: Path) -> BuildConfig:
    config = _config(model_dir, 1.0)
    done = golden(update=True, approve="first").check(real_engine(config), dataset=_unlabelled(),
                                                      classifier=["logits"])
    assert isinstance(done, UpdateResult)
    return config


def test_quarter_of_answers_changed_fails_on_agreement(golden: MakeGolden, model_dir: Path,
                                                        approved: BuildConfig) -> None:
    changed = real_engine(_config(model_dir, 0.98))
    with pytest.raises(GoldenRegression) as info:
        golden().check(changed, l2_delta=0.05)  # the golden remembers that logits are class scores
    lines = str(info.value).splitlines()
    # the approved engine agreed with its reference on every sample
    assert ("[REGRESSION] logits: Top-1 agreement: 75.0% < threshold(99.5%), measured noise 100.0% over 64 "
            "samples") in lines
    assert "  [ok] logits: Output L2 norm delta: 0.01 <= threshold(0.05), measured noise 0" in lines
    assert "  [not evaluated] logits: top1_drop=0.005: not evaluated: the golden dataset has no labels" in lines
    detail = info.value.context["verdict"]
    agreement = next(c for c in detail["checks"] if c["metric"] == "top1_agreement")
    assert (agreement["value"], agreement["threshold"], agreement["status"]) == (0.75, 0.995, "fail")
    passed = [(c["metric"], c["stat"]) for c in detail["checks"] if c["status"] == "pass"]
    assert passed == [("l2_delta", None), ("drift_sd", "entropy"), ("drift_sd", "max_confidence"),
                      ("drift_sd", "top2_margin")]


def test_top1_drop_without_labels_is_refused(golden: MakeGolden, model_dir: Path, approved: BuildConfig) -> None:
    same = real_engine(approved)
    with pytest.raises(GoldenRegression) as info:  # identical outputs, yet a threshold that cannot run fails
        golden().check(same, l2_delta=0.05, top1_drop=0.005)
    text = str(info.value)
    assert "[REFUSED] top1_drop needs labels in the golden dataset" in text and "or use top1_agreement" in text
    assert "[REGRESSION]" not in text and "--trt-update-golden" not in text  # the fix is in the test
    assert text.splitlines()[-1].startswith("The outputs are not the problem: a threshold that cannot be evaluated")
    result = golden().check(same, l2_delta=0.05)  # the default top1_drop is reported, not refused
    assert isinstance(result, CheckResult) and result.verdict.passed
    statuses = {(c.metric, c.status) for c in result.verdict.checks}
    assert statuses == {("l2_delta", "pass"), ("top1_agreement", "pass"), ("top1_drop", "not evaluated"),
                        ("drift_sd", "pass")}


def test_agreement_exactly_at_threshold_passes(golden: MakeGolden, model_dir: Path, approved: BuildConfig) -> None:
    changed = real_engine(_config(model_dir, 0.98))
    assert golden().check(changed, top1_agreement=0.75, drift_sd=None).verdict.passed  # 48/64 == 0.75
    with pytest.raises(GoldenRegression, match=r"Top-1 agreement: 75.0% < threshold\(75.0%\)"):
        golden().check(changed, top1_agreement=np.nextafter(0.75, 1.0), drift_sd=None)


def test_l2_delta_exactly_at_threshold_passes(golden: MakeGolden, model_dir: Path, approved: BuildConfig) -> None:
    changed = real_engine(_config(model_dir, 0.98))
    measured = golden().check(changed, l2_delta=1.0, top1_agreement=0.0, drift_sd=None)
    l2 = measured.metrics["logits"].elements.l2_delta
    assert l2 == pytest.approx(np.sqrt((16 * 0.02**2 + 16 * 0.0198**2) / (64 * (1 + 0.99**2))), rel=1e-4)
    assert golden().check(changed, l2_delta=l2, top1_agreement=0.0, drift_sd=None).verdict.passed
    with pytest.raises(GoldenRegression, match=r"Output L2 norm delta: 0.01 > threshold\(0.01\)"):
        golden().check(changed, l2_delta=np.nextafter(l2, 0.0), top1_agreement=0.0, drift_sd=None)


def test_classifier_switch_off_refuses_top1_thresholds(golden: MakeGolden, approved: BuildConfig) -> None:
    with pytest.raises(GoldenRegression) as info:
        golden().check(real_engine(approved), classifier=False, top1_agreement=0.9)
    assert "[REFUSED] top1_agreement needs an output of class scores" in str(info.value)
    result = golden().check(real_engine(approved), classifier=False)  # defaults that cannot apply are quiet
    assert isinstance(result, CheckResult)
    assert [c.metric for c in result.verdict.checks] == ["l2_delta"]


def test_provenance_note_in_verdict_and_strict_policy(golden: MakeGolden, model_dir: Path,
                                                       approved: BuildConfig) -> None:
    changed = real_engine(_config(model_dir, 0.98))  # another ONNX file: onnx_sha256 and config_hash differ
    verdicts: list[dict[str, object]] = []
    result = golden(on_verdict=verdicts.append).check(changed, top1_agreement=0.7, drift_sd=None)
    assert isinstance(result, CheckResult) and result.note is not None
    assert [p.field for p in result.verdict.provenance] == ["config_hash", "onnx_sha256"]
    assert "within thresholds; approve a refresh to record the new provenance" in result.note
    (stored,) = verdicts
    assert stored["verdict"] == "pass" and stored["message"] == result.note
    detail = stored["detail"]
    assert isinstance(detail, dict) and [p["field"] for p in detail["provenance"]] == ["config_hash", "onnx_sha256"]
    with pytest.raises(GoldenTainted):
        golden(provenance=ProvenancePolicy("fail")).check(changed, top1_agreement=0.7, drift_sd=None)


def test_the_golden_remembers_the_classifier_decision(golden: MakeGolden, model_dir: Path) -> None:
    config = _config(model_dir, 1.0)
    x = _unlabelled().inputs["x"]
    labelled = GoldenDataset.from_arrays({"x": x}, labels=np.arange(N) % C)  # labels index into C: detected
    golden(update=True, approve="boxes, not classes").check(real_engine(config), dataset=labelled, classifier=False)
    result = golden().check(real_engine(config))  # no classifier= now: the recorded False holds
    assert isinstance(result, CheckResult)
    assert [c.metric for c in result.verdict.checks] == ["l2_delta"]
    assert result.metrics["logits"].top1_agreement is None
    detected = golden().check(real_engine(config), classifier=True)
    assert isinstance(detected, CheckResult) and detected.metrics["logits"].top1_agreement == 1.0
