"""Bundles that readers cannot use, in ``bundle verify``, ``bundle diff`` and ``upgrade-report``.

Anyone can edit an unsigned bundle and recompute its manifest, so ``bundle verify`` is the only gate: a golden.json
figure of the wrong type or shape is refused there by its JSON path, and a bundle that fails verification is one
config the upgrade review "could not compare", never an aborted report or a traceback.  The bundles are the real
ONNX Runtime runs of the example suite (a labelled golden check: histograms, confusion counts, tags).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.hostile import recrafted
from tests.upgrade.conftest import copy_run
from tests.upgrade.test_report import cli, report_json

LABELLED = "mobilenet_v2_labelled_ort"
TEST = "examples/upgrade/test_upgrade_ort.py::test_labelled_outputs_match_golden"
OUT = f"checks.{TEST}.outputs.outputs.logits"


def _labelled(folder: Path) -> Path:
    (path,) = folder.glob(f"{LABELLED}-v*.tar.gz")
    return path


def _edit(where: str, change: Callable[[Any, str], None]) -> Callable[[dict[str, Any]], None]:
    """An edit of golden.json at the dotted path ``where`` below the labelled check's ``logits`` figures."""
    def edit(doc: dict[str, Any]) -> None:
        node: Any = doc["checks"][TEST]
        *parents, last = where.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        change(node, last)
    return edit


def _set(value: Any) -> Callable[[Any, str], None]:
    def change(node: Any, key: str) -> None:
        node[int(key) if isinstance(node, list) else key] = value
    return change


def _drop(node: Any, key: str) -> None:
    del node[key]


L = "outputs.outputs.logits"
#: (edit below the check, the JSON path and reason verify names): the crashes the report and pictures had
GOLDEN_EDITS = [
    (f"{L}.histograms.entropy.range", _drop, f"{OUT}.histograms.entropy.range: required key is missing"),
    (f"{L}.histograms.entropy.counts", _drop, f"{OUT}.histograms.entropy.counts: required key is missing"),
    (f"{L}.histograms.entropy.counts.0", _set("3"), f"{OUT}.histograms.entropy.counts.0: expected an integer"),
    (f"{L}.histograms.entropy.range", _set("0..1"), f"{OUT}.histograms.entropy.range: expected an array"),
    (f"{L}.histograms.entropy.range", _set([0.0]), f"{OUT}.histograms.entropy.range: expected 2 items, found 1"),
    (f"{L}.histograms.entropy.range.1", _set(None), f"{OUT}.histograms.entropy.range.1: expected a number, found"),
    (f"{L}.metrics", _set([1]), f"{OUT}.metrics: expected an object or null, found an array"),
    (f"{L}.metrics.drift", _set([1]), f"{OUT}.metrics.drift: expected an object, found an array"),
    (f"{L}.metrics.drift.entropy.drift_sd", _set("0"), f"{OUT}.metrics.drift.entropy.drift_sd: expected a number"),
    (f"{L}.metrics.tags.dark", _set([1]), f"{OUT}.metrics.tags.dark: expected an object, found an array"),
    (f"{L}.metrics.tags.dark.accuracy", _set("1"), f"{OUT}.metrics.tags.dark.accuracy: expected a number or null"),
    (f"{L}.metrics.l2_delta", _set("0.0"), f"{OUT}.metrics.l2_delta: expected a number or null, found a string"),
    (f"{L}.thresholds.l2_delta", _set("0.05"), f"{OUT}.thresholds.l2_delta: expected a number or null"),
    (f"{L}.thresholds.top1_drop", _set(True), f"{OUT}.thresholds.top1_drop: expected a number or null, found a"),
    (f"{L}.confusion.0", _set([1, 2]), f"{OUT}.confusion.0: expected 3 items (label, predicted, count), found 2"),
    (f"{L}.confusion.0.2", _set(1.5), f"{OUT}.confusion.0.2: expected an integer, found a number"),
    (f"{L}.classes", _set("10"), f"{OUT}.classes: expected an integer or null, found a string"),
    ("outputs.outputs", _set([1]), f"checks.{TEST}.outputs.outputs: expected an object or null, found an array"),
    ("outputs", _set("x"), f"checks.{TEST}.outputs: expected an object or null, found a string"),
    ("verdict", _set(3), f"checks.{TEST}.verdict: expected a string, found an integer"),
    ("verdict", _drop, f"checks.{TEST}.verdict: required key is missing"),
    ("generation", _set("1"), f"checks.{TEST}.generation: expected an integer or null, found a string"),
    ("detail", _set("x"), f"checks.{TEST}.detail: expected an object or null, found a string"),
    ("detail.checks.0.threshold", _set("0.05"), f"checks.{TEST}.detail.checks.0.threshold: expected a number"),
    ("detail.checks", _set({}), f"checks.{TEST}.detail.checks: expected an array or null, found an object"),
]


@pytest.mark.parametrize(("where", "change", "message"), GOLDEN_EDITS,
                         ids=[f"{i}:{w.split('.', 2)[-1]}" for i, (w, _, _) in enumerate(GOLDEN_EDITS)])
def test_golden_figures_of_the_wrong_shape_are_refused_by_path(ort_runs: tuple[Path, Path, Path], tmp_path: Path,
                                                               where: str, change: Callable[[Any, str], None],
                                                               message: str) -> None:
    real = _labelled(ort_runs[0])
    verify_bundle(real)  # the real check's figures pass the same check
    path = recrafted(real, tmp_path / real.name, {"golden.json": _edit(where, change)})
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(path)
    assert info.value.context["member"] == "golden.json"
    assert f"golden.json: wrong schema: golden.json:{message}" in info.value.message, info.value.message


def _one_bundle_broken(old: Path, tmp_path: Path, how: str) -> Path:
    new = copy_run(old, tmp_path / "new")
    target = _labelled(new)
    if how == "figures":  # verify's schema refuses it; before, the report's pictures raised KeyError('range')
        crafted = recrafted(target, tmp_path / target.name, {"golden.json": _edit(
            f"{L}.histograms.entropy.range", _drop)})
        target.chmod(0o644)
        shutil.copyfile(crafted, target)
    else:  # a damaged file
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x01
        target.chmod(0o644)
        target.write_bytes(bytes(data))
    return new


@pytest.mark.parametrize("how", ["figures", "damaged"])
def test_one_unverifiable_bundle_is_one_config_not_compared(ort_runs: tuple[Path, Path, Path], tmp_path: Path,
                                                            how: str) -> None:
    old = ort_runs[0]
    new = _one_bundle_broken(old, tmp_path, how)
    code, doc = report_json(old, new, tmp_path / "r.html")
    assert code == 1
    assert {c["config"]: c["verdict"] for c in doc["configs"]} == {
        LABELLED: "could not compare", "mobilenet_v2_qdq_ort": "unchanged"}
    assert doc["counts"]["could not compare"] == 1 and doc["counts"]["unchanged"] == 1
    (broken,) = [c for c in doc["configs"] if c["config"] == LABELLED]
    assert broken["reasons"][0].startswith(f"could not verify the NEW bundle {_labelled(new).name}: the bundle "
                                           "fails verification (")
    assert "check it with `pytest-trt bundle verify`" in broken["reasons"][0]
    assert "could not compare" in (tmp_path / "r.html").read_text()
    text = cli("upgrade-report", old, new, "--no-html")
    assert text.returncode == 1 and "Traceback" not in text.stderr and text.stderr == "", text.stderr
    assert f"COULD NOT COMPARE              {LABELLED} v1.0.0" in text.stdout


def _with_empty_warning(doc: dict[str, Any]) -> None:
    record = doc["record"]
    record["messages"] = [*record.get("messages", []), {"severity": "WARNING", "text": ""}]


def test_an_empty_warning_is_listed_by_bundle_diff_and_the_report(ort_runs: tuple[Path, Path, Path],
                                                                  tmp_path: Path) -> None:
    old = ort_runs[0]
    new = copy_run(old, tmp_path / "new")
    target = _labelled(new)
    crafted = recrafted(target, tmp_path / target.name, {"build.json": _with_empty_warning})
    verify_bundle(crafted)  # a warning without text is a valid record
    diff = cli("bundle", "diff", _labelled(old), crafted)
    assert diff.returncode == 1 and diff.stderr == "", diff.stderr
    lines = diff.stdout.splitlines()
    assert lines[lines.index("  new warnings (1):") + 1] == "    ", diff.stdout
    target.chmod(0o644)
    shutil.copyfile(crafted, target)
    code, doc = report_json(old, new, tmp_path / "r.html")
    (config,) = [c for c in doc["configs"] if c["config"] == LABELLED]
    assert config["structure"]["new_warnings"] == [""] and code == 0
    html = (tmp_path / "r.html").read_text()
    assert "new warnings" in html
    assert json.loads(json.dumps(doc))["counts"]["could not compare"] == 0


def test_an_unreadable_build_failure_note_is_one_config_not_compared(ort_runs: tuple[Path, Path, Path],
                                                                     tmp_path: Path) -> None:
    old = ort_runs[0]
    new = copy_run(old, tmp_path / "new")
    _labelled(new).unlink()
    note = new / f"{LABELLED}-v1.0.0-onnxruntime.build-failed.json"
    note.write_text('{"config": ')  # torn: the writer was killed
    code, doc = report_json(old, new, tmp_path / "r.html")
    assert code == 1 and {c["config"]: c["verdict"] for c in doc["configs"]} == {
        LABELLED: "could not compare", "mobilenet_v2_qdq_ort": "unchanged"}
    (broken,) = [c for c in doc["configs"] if c["config"] == LABELLED]
    assert broken["reasons"][0].startswith(f"could not verify the NEW build-failure note {note.name}: not a readable "
                                           "pytest-trt build-failure note (")
