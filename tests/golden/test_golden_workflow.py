"""GoldenCheck against a real ONNX Runtime session: missing, update, pass, regressions, taint, structure."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from golden_engines import FUSED, OrtEngine, OutputsOnly, real_engine

from pytest_trt.config import BuildConfig
from pytest_trt.errors import GoldenError, GoldenMissing, GoldenTainted
from pytest_trt.golden.approvals import read_jsonl
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.store import GoldenFile
from pytest_trt.golden.workflow import GoldenCheck, GoldenRegression, GoldenStructureWarning, UpdateResult

MakeConfig = Callable[..., BuildConfig]
MakeGolden = Callable[..., GoldenCheck]
COMMAND = 'pytest tests/test_model.py::test_tiny --trt-engine-build --trt-update-golden --trt-approve "REASON"'


def approve(golden: MakeGolden, engine: object, dataset: GoldenDataset | None = None, reason: str = "ok") -> UpdateResult:
    result = golden(update=True, approve=reason).check(engine, dataset=dataset)
    assert isinstance(result, UpdateResult)
    return result


def test_missing_golden_fails_with_command_and_creates_nothing(
    golden: MakeGolden, make_config: MakeConfig, golden_dir: Path, dataset: GoldenDataset
) -> None:
    with pytest.raises(GoldenMissing) as info:  # no dataset given: the first failure names it, with the fix
        golden().check(real_engine(make_config()))
    text = str(info.value)
    assert "and check() was given no golden dataset to create it from" in text
    assert 'dataset=GoldenDataset.from_directory("golden_data")' in text and COMMAND in text
    with pytest.raises(GoldenMissing) as info:
        golden().check(real_engine(make_config()), dataset=dataset)
    assert COMMAND in str(info.value) and "never created silently" in str(info.value)
    assert "no golden dataset" not in str(info.value)
    assert not golden_dir.exists() or not list(golden_dir.iterdir())


def test_update_then_check_passes_in_profile_batches(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset, golden_dir: Path
) -> None:
    engine = OrtEngine(make_config(batch=16))
    result = approve(golden, engine, dataset, "first golden, CR-1")
    assert result.generation == 1 and result.deltas == {}
    assert engine.calls == [16] * 6 + [4]  # 100 samples within the profile's max batch
    outcome = golden().check(engine)
    assert outcome.generation == 1
    assert outcome.metrics["logits"].elements.l2_delta == 0.0
    assert outcome.metrics["logits"].top1_agreement == 1.0
    (approval,) = read_jsonl(golden_dir)
    assert approval["reason"] == "first golden, CR-1" and approval["old_provenance"] is None
    assert approval["new_provenance"]["backend"] == "onnxruntime" and approval["approver"]


def test_changed_model_fails_with_regression_lines(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset
) -> None:
    approve(golden, real_engine(make_config()), dataset)
    changed = real_engine(make_config(scale=1.25))
    with pytest.raises(GoldenRegression) as info:  # another ONNX: compared anyway, the thresholds decide
        golden().check(changed, l2_delta=0.05)
    text = str(info.value)
    # the approved engine ran bit-identical to its reference: the measured noise is 0
    assert "[REGRESSION] logits: Output L2 norm delta: 0.25 > threshold(0.05), measured noise 0" in text.splitlines()
    assert "[GOLDEN] provenance differs, compared anyway: onnx_sha256: golden " in text
    assert text.splitlines()[-1].strip() == COMMAND
    with pytest.raises(GoldenTainted) as tainted:  # strict policy: any difference is fatal
        golden(provenance=ProvenancePolicy("fail")).check(changed, l2_delta=0.05)
    assert tainted.value.context["fields"] == ("config_hash", "onnx_sha256")
    assert "onnx_sha256 differs" in str(tainted.value) and "approved refresh" in str(tainted.value)


def test_backend_version_and_device_change_compared_or_tainted_by_policy(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset
) -> None:
    config = make_config()
    approve(golden, OrtEngine(config), dataset)
    upgraded = OrtEngine(config, backend_version="99.0", device="other-cpu")
    notes: list[str] = []
    result = golden(on_note=notes.append).check(upgraded)  # default policy: compare, pass, note the change
    assert result.verdict.passed and [p.field for p in result.verdict.provenance] == ["backend_version", "device"]
    assert notes == [result.note] and "within thresholds; approve a refresh to record the new provenance" in notes[0]
    assert "backend_version: golden onnxruntime " in notes[0] and "engine onnxruntime 99.0" in notes[0]
    with pytest.raises(GoldenTainted) as info:
        golden(provenance=ProvenancePolicy("fail")).check(upgraded)
    assert info.value.context["fields"] == ("backend_version", "device")
    assert "backend_version differs (golden '" in str(info.value) and "'onnxruntime 99.0')" in str(info.value)
    assert "[REGRESSION]" not in str(info.value)  # same outputs: only the provenance differs
    with pytest.raises(GoldenTainted) as info:  # per field: the device alone is fatal
        golden(provenance=ProvenancePolicy("compare", ("device",))).check(upgraded)
    assert info.value.context["fields"] == ("device",)
    assert "provenance differs, compared anyway: backend_version" in str(info.value)


def test_approved_refresh_keeps_history_and_reports_deltas(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset, golden_dir: Path
) -> None:
    approve(golden, OrtEngine(make_config()), dataset)
    result = approve(golden, OrtEngine(make_config(scale=1.25), layers=FUSED), reason="TRT 10.13 upgrade, CR-1234")
    assert result.generation == 2
    assert result.deltas["logits"].elements.l2_delta == pytest.approx(0.25, rel=1e-5)
    assert "fusions gained" in (result.structure or "")
    lines = result.summary_lines()
    assert any("logits: L2 delta 0.25" in line for line in lines)
    golden().check(OrtEngine(make_config(scale=1.25), layers=FUSED))
    with GoldenFile(golden_dir / "tiny.h5") as g:
        assert [h.generation for h in g.history("tiny")] == [1] and g["tiny"].generation == 2
        assert [a["reason"] for a in g.approvals()] == ["ok", "TRT 10.13 upgrade, CR-1234"]
    last = read_jsonl(golden_dir)[-1]
    assert last["old_provenance"]["onnx_sha256"] != last["new_provenance"]["onnx_sha256"]
    assert last["deltas"]["logits"]["l2_delta"] == pytest.approx(0.25, rel=1e-5)
    assert last["structure"] and last["test"] == "tests/test_model.py::test_tiny"


def test_fusion_change_alone_fails_the_structure_check(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset
) -> None:
    config = make_config()
    approve(golden, OrtEngine(config), dataset)
    fused = OrtEngine(config, layers=FUSED)  # same model, same outputs, different fusion
    with pytest.raises(GoldenRegression) as info:
        golden().check(fused)
    text = str(info.value)
    assert "[STRUCTURE]" in text and "conv_dw + relu6" in text and "[REGRESSION]" not in text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        golden().check(fused, structure="warn")
    assert any(issubclass(w.category, GoldenStructureWarning) for w in caught)
    assert golden().check(fused, structure="ignore").structure is None


def test_tactics_and_timings_are_masked(golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset) -> None:
    config = make_config()
    approve(golden, OrtEngine(config), dataset)
    engine = OrtEngine(config)
    engine.record = engine.record.__class__(**{**engine.record.__dict__, "timings": {"build_s": 9.9},
                                               "layers": tuple(layer.__class__(**{**layer.__dict__, "tactic": "0xdead"})
                                                               for layer in engine.record.layers)})
    result = golden().check(engine)  # raises on a structure change; each mask: test_golden_structure_mask.py
    assert result.structure is None


def test_outputs_mode_update_and_check(golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset) -> None:
    config = make_config()
    outputs = real_engine(config).run({"x": dataset.inputs["x"]})
    check = golden(update=True, approve="imported", config_provider=lambda: config)
    check.check(outputs, dataset=dataset)
    golden(config_provider=lambda: config).check(outputs)
    bad = {**outputs, "logits": outputs["logits"] * 1.5}
    with pytest.raises(GoldenRegression, match=r"Output L2 norm delta: 0.5 > threshold\(0.05\)"):
        golden(config_provider=lambda: config).check(bad)
    with pytest.raises(GoldenError, match="axis 0 must be that long"):
        golden(config_provider=lambda: config).check({k: v[:10] for k, v in outputs.items()})


def test_missing_and_new_output_names(golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset) -> None:
    config = make_config()
    approve(golden, real_engine(config), dataset)
    with pytest.raises(GoldenError, match=r"missing output\(s\) 'pred' that the golden holds"):
        golden().check(OutputsOnly(config))


def test_dataset_dtype_and_shape_mismatch(golden: MakeGolden, make_config: MakeConfig, golden_dir: Path) -> None:
    config = make_config()
    as_float64 = GoldenDataset.from_arrays({"x": np.zeros((4, 8))})
    with pytest.raises(GoldenError, match="golden input 'x' is float64, the engine takes float32"):
        golden(update=True, approve="x").check(real_engine(config), dataset=as_float64)
    wrong_shape = GoldenDataset.from_arrays({"x": np.zeros((4, 6), np.float32)})
    with pytest.raises(GoldenError, match=r"golden input 'x' has samples of shape \(6,\)"):
        golden(update=True, approve="x").check(real_engine(config), dataset=wrong_shape)
    wrong_name = GoldenDataset.from_arrays({"image": np.zeros((4, 8), np.float32)})
    with pytest.raises(GoldenError, match=r"dataset has inputs \['image'\], the engine takes \['x'\]"):
        golden(update=True, approve="x").check(real_engine(config), dataset=wrong_name)
    assert not (golden_dir / "tiny.h5").exists()  # failed updates write nothing


def test_labels_of_wrong_length_are_refused() -> None:
    with pytest.raises(GoldenError, match=r"labels have shape \(99,\); expected \(100,\)"):
        GoldenDataset.from_arrays({"x": np.zeros((100, 8), np.float32)}, labels=np.zeros(99, np.int64))
    with pytest.raises(GoldenError, match="labels must be integers"):
        GoldenDataset.from_arrays({"x": np.zeros((2, 8), np.float32)}, labels=[0.5, 1.0])
    with pytest.raises(GoldenError, match="3 tags for 2 samples"):
        GoldenDataset.from_arrays({"x": np.zeros((2, 8), np.float32)}, tags=["a", "b", "c"])


def test_update_without_approval_and_bad_arguments(golden: MakeGolden, make_config: MakeConfig) -> None:
    with pytest.raises(GoldenError, match='--trt-approve "REASON"'):
        golden(update=True).check(real_engine(make_config()))
    with pytest.raises(GoldenError, match="valid thresholds"):
        golden().check(real_engine(make_config()), l2=0.1)
    with pytest.raises(GoldenError, match="structure='maybe'"):
        golden().check(real_engine(make_config()), structure="maybe")


def test_dataset_passed_to_check_must_match_the_file(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset
) -> None:
    config = make_config()
    approve(golden, real_engine(config), dataset)
    other = GoldenDataset.from_arrays({"x": dataset.inputs["x"] + 1}, dataset.labels, dataset.tags)
    with pytest.raises(GoldenRegression, match="differs from the golden file's dataset"):
        golden().check(real_engine(config), dataset=other)
    replaced = approve(golden, real_engine(config), other, reason="new curated set")  # approved replacement
    assert replaced.generation == 2 and replaced.deltas == {}
    assert replaced.summary_lines()[:1] == ["tiny.h5 [tiny] generation 2: new golden dataset; generation 1 ran other "
                                        "inputs, so its outputs are not comparable (the approval records both "
                                        "provenances)"]
    golden().check(real_engine(config), dataset=other)


def test_accuracy_drop_against_labels_fails(golden: MakeGolden, make_config: MakeConfig) -> None:
    config = make_config()
    x = np.random.default_rng(3).standard_normal((200, 8)).astype(np.float32)
    labels = real_engine(config).run({"x": x})["pred"]  # the golden is 100% accurate by construction
    data = GoldenDataset.from_arrays({"x": x}, labels=labels, tags=["edge"] * 20 + [""] * 180)
    approve(golden, real_engine(config), data)
    with pytest.raises(GoldenRegression) as info:
        golden().check(real_engine(make_config(seed=1)), l2_delta=None, drift_sd=None)
    lines = str(info.value).splitlines()
    assert any(line.startswith("[REGRESSION] logits: Top-1 Acc drop: -") and "(accuracy 100.0% ->" in line
               for line in lines)
    assert any(line.startswith("[REGRESSION] logits[tag=edge]: Top-1 Acc drop: -") for line in lines)
    assert json.dumps(info.value.context["verdict"])  # JSON-able context for reports


def test_update_refuses_thresholds_its_check_would_refuse(
    golden: MakeGolden, make_config: MakeConfig, golden_dir: Path
) -> None:
    """top1_drop without labels: the approval is refused before anything is written (golden and log unchanged),
    with the refusal the next check would give; the same threshold with labels is approved."""
    unlabelled = GoldenDataset.from_arrays({"x": np.random.default_rng(3).standard_normal((40, 8)).astype(np.float32)})
    engine = real_engine(make_config())
    approve(golden, engine, unlabelled)  # the defaults: approved
    path, log = golden_dir / "tiny.h5", golden_dir / "APPROVALS.jsonl"
    before = (path.read_bytes(), log.read_bytes())
    with pytest.raises(GoldenError) as info:
        golden(update=True, approve="CR-2").check(engine, top1_drop=0.02)
    text = str(info.value)
    assert "refusing to approve: top1_drop needs labels in the golden dataset" in text
    assert "the golden could never pass" in text
    assert (path.read_bytes(), log.read_bytes()) == before
    with pytest.raises(GoldenRegression, match=r"\[REFUSED\] top1_drop needs labels"):  # what it would have met
        golden().check(engine, top1_drop=0.02)
    labelled = GoldenDataset.from_arrays({"x": unlabelled.inputs["x"]}, labels=np.arange(40) % 5)
    golden(update=True, approve="CR-3").check(engine, dataset=labelled, top1_drop=0.02)
    golden().check(engine, top1_drop=0.02)
