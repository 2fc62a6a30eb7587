"""The upgrade review's verdict per config, from bundles written by the real writer, through the real CLI.

Each case changes one thing between OLD and NEW (a tag's accuracy, the overall accuracy, one environment variable,
the config's version) and the expected verdict and figures are worked out here from the definitions in
docs/goldens.md ("top1_drop: max accuracy drop, as a fraction, overall and per tag") and docs/upgrade.md, with
exact fractions, never by calling the review's own code.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import tarfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit.bundle import write_bundle
from tests.conftest import needs_rtx
from tests.upgrade.conftest import copy_run
from tests.upgrade.test_report import cli, report_json

pytestmark = needs_rtx
TEST = "tests/test_m.py::test_outputs"


@pytest.fixture(scope="module")
def built() -> Any:
    from tests.audit.rtx_build import build_small

    return build_small()


@pytest.fixture(scope="module")
def record(built: Any) -> Any:
    from pytest_trt.buildlog.readers import parse_entries

    return parse_entries(built.log)


@pytest.fixture(scope="module")
def environment() -> dict[str, Any]:
    from pytest_trt.audit.environment import capture_environment

    return {**capture_environment(backend="tensorrt-rtx", rootdir=None), "env": {}}


def _check(accuracy: Fraction, golden: Fraction, tags: dict[str, tuple[Fraction, Fraction]],
           top1_drop: float) -> dict[str, Any]:
    """A golden check's verdict as the plugin stores it (golden.json), with these accuracies (new, golden)."""
    metrics = {"samples": 64, "count": 640, "max_abs": 0.0, "max_rel": 0.0, "l2_delta": 0.0, "cosine": 1.0,
               "golden_norm": 10.0, "nonfinite_obtained": 0, "nonfinite_golden": 0, "top1_agreement": 1.0,
               "accuracy": float(accuracy), "golden_accuracy": float(golden),
               # OutputMetrics.accuracy_drop: obtained minus golden, in floats as the check computes it
               "accuracy_drop": float(accuracy) - float(golden),
               "tags": {t: {"count": 8, "agreement": 1.0, "accuracy": float(a), "golden_accuracy": float(g)}
                        for t, (a, g) in tags.items()},
               "drift": {}}
    thresholds = {"l2_delta": 0.05, "max_abs": None, "max_rel": None, "cosine": None, "top1_agreement": None,
                  "top1_drop": top1_drop, "drift_sd": 3.0, "allow_nonfinite": False}
    return {TEST: {"config_hash": "x", "verdict": "pass", "message": None, "test": TEST,
                   "outputs": {"schema": 1, "outputs": {"logits": {"metrics": metrics, "thresholds": thresholds}}}}}


def _runs(tmp_path: Path, built: Any, record: Any, old: tuple[dict[str, Any] | None, dict[str, Any]],
          new: tuple[dict[str, Any] | None, dict[str, Any]], new_result: Any = None) -> tuple[Path, Path]:
    folders = []
    for side, (golden, env), result in (("old", old, built), ("new", new, new_result or built)):
        folder = tmp_path / side
        write_bundle(result, folder, record=record, environment=env, include_engine=False, golden_results=golden)
        folders.append(folder)
    return folders[0], folders[1]


def _config(doc: dict[str, Any]) -> dict[str, Any]:
    (config,) = doc["configs"]
    return dict(config)


F = Fraction
ALL_RIGHT = {"edge": (F(1), F(1)), "typical": (F(1), F(1))}


def test_a_breach_in_one_tag_only_is_a_regression(tmp_path: Path, built: Any, record: Any,
                                                  environment: dict[str, Any]) -> None:
    # NEW: 7 of 8 edge samples wrong, every typical one right: overall 57/64 against 64/64 (a drop of 7/64, within
    # 0.2), the edge tag 1/8 against 8/8 (a drop of 7/8, past 0.2)
    new_check = _check(F(57, 64), F(1), {"edge": (F(1, 8), F(1)), "typical": (F(1), F(1))}, top1_drop=0.2)
    old, new = _runs(tmp_path, built, record, (_check(F(1), F(1), ALL_RIGHT, 0.2), environment),
                     (new_check, environment))
    code, doc = report_json(old, new, tmp_path / "r.html")
    config = _config(doc)
    assert code == 1 and config["verdict"] == "regression", config
    breached = [(m["tag"], m["metric"], m["new"]) for m in config["metrics"] if m["breached"]]
    # figures in the check's unit: a drop of 7/8 is -87.5 %, its threshold 0.2 is -20.0 % (docs/upgrade.md)
    assert breached == [("edge", "top1_drop", pytest.approx(-100 * float(F(1) - F(1, 8))))]
    overall = {(m["tag"], m["metric"]): m for m in config["metrics"]}[(None, "top1_drop")]
    assert overall["new"] == pytest.approx(-100 * float(F(7, 64))) and not overall["breached"]
    assert overall["unit"] == "%" and overall["raw"]["new"] == pytest.approx(float(F(7, 64)))
    assert config["reasons"] == [f"logits[tag=edge]: top1_drop -87.5% < threshold -20.0% ({TEST})"]


def test_a_tag_within_its_threshold_is_no_regression(tmp_path: Path, built: Any, record: Any,
                                                     environment: dict[str, Any]) -> None:
    new_check = _check(F(63, 64), F(1), {"edge": (F(7, 8), F(1)), "typical": (F(1), F(1))}, top1_drop=0.2)
    old, new = _runs(tmp_path, built, record, (_check(F(1), F(1), ALL_RIGHT, 0.2), environment),
                     (new_check, environment))
    code, doc = report_json(old, new, tmp_path / "r.html")
    assert code == 0 and _config(doc)["verdict"] == "changed within thresholds"


@pytest.mark.parametrize(("new_accuracy", "golden_accuracy", "verdict"), [
    (F(56, 64), F(1), "regression"),  # 8 of 64 more wrong: a drop of 1/8, past 0.05
    (F(1), F(56, 64), "changed within thresholds"),  # 8 of 64 more right: a gain, whatever its size
])
def test_the_sign_of_an_overall_top1_change(tmp_path: Path, built: Any, record: Any, environment: dict[str, Any],
                                            new_accuracy: Fraction, golden_accuracy: Fraction, verdict: str) -> None:
    tags: dict[str, tuple[Fraction, Fraction]] = {}
    old_check = _check(golden_accuracy, golden_accuracy, tags, top1_drop=0.05)
    new_check = _check(new_accuracy, golden_accuracy, tags, top1_drop=0.05)
    old, new = _runs(tmp_path, built, record, (old_check, environment), (new_check, environment))
    code, doc = report_json(old, new, tmp_path / "r.html")
    config = _config(doc)
    row = {(m["tag"], m["metric"]): m for m in config["metrics"]}[(None, "top1_drop")]
    drop = golden_accuracy - new_accuracy  # docs/goldens.md: the accuracy drop, positive when NEW is worse
    assert row["new"] == pytest.approx(-100 * float(drop)) and row["old"] == 0.0  # in %, a drop negative
    assert row["breached"] is (drop > F(5, 100))
    assert config["verdict"] == verdict and code == (1 if verdict == "regression" else 0)


def _environment_json(folder: Path) -> dict[str, Any]:
    (bundle,) = folder.glob("*.tar.gz")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("environment.json")
        assert member is not None
        return dict(json.loads(member.read()))


def test_an_environment_only_change_is_one_difference_and_not_unchanged(tmp_path: Path, built: Any, record: Any,
                                                                        environment: dict[str, Any]) -> None:
    same = _check(F(1), F(1), ALL_RIGHT, 0.2)
    threads = {**environment, "env": {"OMP_NUM_THREADS": "1"}}
    old, new = _runs(tmp_path, built, record, (same, environment), (copy.deepcopy(same), threads))
    a, b = _environment_json(old), _environment_json(new)
    # the difference, read from the two environment.json files: one variable set in NEW only
    differing = {(k, sk) for k in set(a) | set(b) if a.get(k) != b.get(k)
                 for sk in set(a.get(k) or {}) | set(b.get(k) or {})}
    assert differing == {("env", "OMP_NUM_THREADS")}
    code, doc = report_json(old, new, tmp_path / "r.html")
    config = _config(doc)
    assert config["environment"] == [{"key": "env.OMP_NUM_THREADS", "old": None, "new": "1"}]
    assert config["verdict"] == "changed within thresholds" and code == 0
    assert re.fullmatch(r"0 of \d+ golden metrics moved, none past its threshold; 1 environment difference\(s\)",
                        config["reasons"][0]), config["reasons"]
    # without golden figures the same change is "changed (outputs not checked)", never "unchanged"; outputs
    # nobody checked fail the review (exit 1) unless --allow-unchecked
    old2, new2 = _runs(tmp_path / "plain", built, record, (None, environment), (None, threads))
    code2, doc2 = report_json(old2, new2, tmp_path / "r2.html")
    assert _config(doc2)["verdict"] == "changed (outputs not checked)" and code2 == 1
    assert "outputs not checked: no test of this config ran a golden check" in _config(doc2)["reasons"]
    allowed = cli("upgrade-report", old2, new2, "--no-html", "--allow-unchecked")
    assert allowed.returncode == 0, allowed.stdout


def test_an_approval_run_against_its_check_run_is_unchanged(ort_runs: tuple[Path, Path, Path],
                                                           tmp_path: Path) -> None:
    """OLD approves the goldens (its bundles hold no check figures), NEW checks against them with the same engine."""
    old, _, golden = ort_runs
    approve = golden.parent / "approve" / "bundles"
    assert sorted(p.name for p in approve.glob("*.tar.gz")) == sorted(p.name for p in old.glob("*.tar.gz"))
    code, doc = report_json(approve, old, tmp_path / "r.html")
    assert code == 0 and {c["verdict"] for c in doc["configs"]} == {"unchanged"}, doc["configs"]
    for config in doc["configs"]:
        # OLD's figures are absent, except the distribution means, which show the golden's own as OLD's
        assert all(m["old"] is None for m in config["metrics"] if not m["metric"].startswith("mean "))
        assert all(m["old"] == m["golden"] for m in config["metrics"] if m["metric"].startswith("mean "))
        assert not any("moved" in r for r in config["reasons"]), config["reasons"]


def test_configs_pair_by_name_and_version(tmp_path: Path, built: Any, record: Any,
                                          environment: dict[str, Any]) -> None:
    bumped = dataclasses.replace(built, config={**built.config, "version": "2"})
    old, new = _runs(tmp_path, built, record, (None, environment), (None, environment), new_result=bumped)
    code, doc = report_json(old, new, tmp_path / "r.html")
    assert code == 1 and doc["configs"] == []
    assert [(s["config"], s["version"]) for s in doc["only_old"]] == [("conv_bn_relu", "1")]
    assert [(s["config"], s["version"]) for s in doc["only_new"]] == [("conv_bn_relu", "2")]
    twin = copy_run(old, tmp_path / "twin")
    code, doc = report_json(old, twin, tmp_path / "same.html")
    assert code == 0 and [(c["config"], c["version"], c["verdict"]) for c in doc["configs"]] == [
        ("conv_bn_relu", "1", "unchanged")]
    text = cli("upgrade-report", old, new, "--no-html").stdout
    assert "ONLY IN OLD                    conv_bn_relu v1 (" in text
    assert "ONLY IN NEW                    conv_bn_relu v2 (" in text


@pytest.mark.parametrize(("new_accuracy", "golden_accuracy", "threshold"), [
    (F(91, 100), F(92, 100), "0.01"),  # exactly at the threshold: 0.92 - 0.91 is 0.010000000000000009 in floats
    (F(189, 200), F(190, 200), "0.005"),  # the default threshold, exactly
    (F(90, 100), F(92, 100), "0.01"),  # one sample past it
    (F(917, 1000), F(920, 1000), "0.003"),
])
def test_a_top1_drop_at_its_threshold_is_within(tmp_path: Path, built: Any, record: Any,
                                                environment: dict[str, Any], new_accuracy: Fraction,
                                                golden_accuracy: Fraction, threshold: str) -> None:
    """The boundary is inclusive (docs/goldens.md: the max accuracy drop), whatever the floats' rounding."""
    tags = {"edge": (new_accuracy, golden_accuracy)}
    old_check = _check(golden_accuracy, golden_accuracy, {"edge": (golden_accuracy, golden_accuracy)},
                       float(threshold))
    new_check = _check(new_accuracy, golden_accuracy, tags, float(threshold))
    old, new = _runs(tmp_path, built, record, (old_check, environment), (new_check, environment))
    code, doc = report_json(old, new, tmp_path / "r.html")
    past = golden_accuracy - new_accuracy > Fraction(threshold)
    rows = [m for m in _config(doc)["metrics"] if m["metric"] == "top1_drop"]
    assert [(m["tag"], m["breached"]) for m in rows] == [(None, past), ("edge", past)]
    assert _config(doc)["verdict"] == ("regression" if past else "changed within thresholds")
