"""Goldens written with the earlier HDF5 filters still read, compare and refresh.

``tests/data/golden_v1/legacy.h5`` was written by the code of commit 8dc4855
(inputs gzip-4 + shuffle, outputs lzf) with ``make_golden_v1.py`` beside it.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pytest_trt.config import BuildConfig
from pytest_trt.golden import store
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, GoldenRegression, GoldenSettings, UpdateResult

LEGACY = Path(__file__).parent.parent / "data" / "golden_v1"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_golden_v1", LEGACY / "make_golden_v1.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    folder = tmp_path / "golden"
    shutil.copytree(LEGACY, folder)
    return folder


def _check(folder: Path, **settings: object) -> GoldenCheck:
    config = BuildConfig(name="legacy", onnx=folder / "legacy.onnx")
    return GoldenCheck(GoldenSettings(golden_dir=folder, **settings),  # type: ignore[arg-type]
                       config_provider=lambda: config, nodeid="tests/test_legacy.py::test_legacy")


def test_legacy_file_has_the_old_filters_and_reads(legacy: Path) -> None:
    _, outputs = _maker().data()
    with store.GoldenFile(legacy / "legacy.h5") as g:
        assert g.inputs()["x"].compression == "gzip" and g.inputs()["x"].shuffle
        snap = g["legacy"]
        assert snap.generation == 2 and snap.outputs["logits"].compression == "lzf"
        np.testing.assert_array_equal(snap.outputs["logits"][()], outputs["logits"])
        np.testing.assert_array_equal(g.history("legacy")[0].outputs["feat"][()], outputs["feat"] * 0.5)
        assert [a["reason"] for a in g.approvals()] == ["legacy fixture generation 1", "legacy fixture generation 2"]


def test_legacy_golden_compares_pass_and_fail(legacy: Path) -> None:
    _, outputs = _maker().data()
    result = _check(legacy).check(outputs)
    assert isinstance(result, CheckResult) and result.generation == 2
    assert result.metrics["logits"].elements.l2_delta == 0.0 and result.metrics["logits"].top1_agreement == 1.0
    moved = {"logits": outputs["logits"] * 1.2, "feat": outputs["feat"]}
    with pytest.raises(GoldenRegression, match="l2"):
        _check(legacy).check(moved)


def test_legacy_golden_refreshes_with_todays_filters(legacy: Path) -> None:
    _, outputs = _maker().data()
    updated = _check(legacy, update=True, approve="refresh on the new filters").check(outputs)
    assert isinstance(updated, UpdateResult) and updated.generation == 3
    assert updated.deltas["logits"].elements.l2_delta == 0.0
    with store.GoldenFile(legacy / "legacy.h5") as g:
        ds = g["legacy"].outputs["logits"]
        assert ds.compression is None and ds.chunks is None  # today's layout (unfiltered, contiguous) ...
        assert g.history("legacy")[-1].outputs["logits"].compression == "lzf"  # ... next to the legacy history
        np.testing.assert_array_equal(ds[()], outputs["logits"])
        assert [h.generation for h in g.history("legacy")] == [1, 2]
    assert isinstance(_check(legacy).check(outputs), CheckResult)
