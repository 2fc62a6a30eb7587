"""``--localize`` on the calibration incident: the Q/DQ models the engines were built from, bisected OLD vs NEW."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from tests.upgrade.conftest import bundle_doc
from tests.upgrade.test_report import cli


def _first_moved_tensor(old: Path, new: Path) -> str:
    """The first quantized tensor, in the float model's topological order, whose recorded scale differs."""
    import onnx

    ra = bundle_doc(old, "build.json")["build"]["extra"]["calibration"]["ranges"]
    rb = bundle_doc(new, "build.json")["build"]["extra"]["calibration"]["ranges"]
    model = onnx.load(bundle_doc(new, "config.json")["pinned"]["onnx"])
    order = [i.name for i in model.graph.input] + [o for n in model.graph.node for o in n.output]
    return next(t for t in order if t in ra and t in rb
                and max(map(abs, ra[t])) != max(map(abs, rb[t])))


def test_localize_bisects_the_qdq_models(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    run = cli("upgrade-report", digits_incident["old"], digits_incident["new"], "--localize", "--json",
              "--no-quant-errors", "-o", tmp_path / "r.html")
    (config,) = json.loads(run.stdout)["configs"]
    loc = config["localization"]
    expected = _first_moved_tensor(digits_incident["old"], digits_incident["new"])
    assert loc["bisected"] is True and loc["compared"] == "OLD vs NEW built models"
    assert loc["quantized_tensor"] == expected
    ra = bundle_doc(digits_incident["old"], "build.json")["build"]["extra"]["calibration"]["ranges"][expected]
    assert loc["qdq"].startswith(f"Q/DQ of tensor '{expected}'") and f"[{ra[0]:.4g}, {ra[1]:.4g}] ->" in loc["qdq"]
    assert loc["path"][0]["error"] > 1e-3 and loc["steps"] <= 10
    html = (tmp_path / "r.html").read_text()
    assert f"Q/DQ of tensor &#x27;{expected}&#x27;" in html


def test_a_changed_model_file_is_said_not_bisected(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    from pytest_trt.upgrade.localize import localize_review
    from pytest_trt.upgrade.report import make_report

    report = make_report(str(digits_incident["old"]), str(digits_incident["new"]), quant_errors=False)
    (review,) = report.reviews
    assert review.new is not None and review.new.bundle is not None
    vb = review.new.bundle
    moved = tmp_path / "digits_mnet.onnx"
    shutil.copyfile(vb.config["pinned"]["onnx"], moved)
    moved.write_bytes(moved.read_bytes() + b"\x00")  # the model edited after the run
    config = {**vb.config, "pinned": {**vb.config["pinned"], "onnx": str(moved)}}
    docs = {**vb.docs, "config.json": config}
    new = dataclasses.replace(review.new, bundle=dataclasses.replace(vb, docs=docs))
    loc = localize_review(dataclasses.replace(review, new=new))
    assert loc["bisected"] is False and loc["node"] is None
    assert loc["reason"].startswith(f"NEW: the model file {moved} changed since the run (sha256 ")
