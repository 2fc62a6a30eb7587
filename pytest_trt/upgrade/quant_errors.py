"""Per-tensor quantization errors of a regressed INT8 config, OLD beside NEW, in the upgrade review.

The measurement is ``pytest-trt calib errors``' own (:func:`pytest_trt.sensitivity.tensor_errors.measure`:
float model against the Q/DQ model, each quantized tensor's own SQNR), made on the models the engines
were built from (:mod:`pytest_trt.upgrade.built_models`) and a few samples of the golden dataset, so
a reviewer sees which tensors the new calibration quantizes badly, and which nodes to leave in float.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_trt.upgrade.model import REGRESSION, ConfigReview, UpgradeReport
from pytest_trt.upgrade.pairing import Side

SAMPLES = 64
TOP = 10
NODES = 5


def _golden_path(side: Side, golden_dir: Path | None) -> Path | str:
    """The golden file NEW's checks compared against, or why there is none."""
    golden = (side.bundle.golden if side.bundle is not None else None) or {}
    named = [str((v.get("outputs") or {}).get("golden_file") or v.get("golden") or "") for v in golden.values()]
    for name in (n for n in named if n):
        if Path(name).is_file():
            return Path(name)
        if golden_dir is not None and (golden_dir / Path(name).name).is_file():
            return golden_dir / Path(name).name
    if not any(named):
        return "the NEW bundle names no golden file (no golden check ran)"
    return f"the golden file {named[0]} is gone (give --golden DIR)"


def _measure(side: Side, golden: Path, cache_dir: Path | None) -> Any:
    """The TensorErrors of ``side``'s Q/DQ model, or a reason string."""
    from pytest_trt.golden.store import GoldenFile
    from pytest_trt.sensitivity.tensor_errors import batches_of, measure
    from pytest_trt.upgrade.built_models import built_model

    bm = built_model(side, cache_dir=cache_dir)
    if isinstance(bm, str):
        return bm
    if bm.kind != "qdq":
        return "not a calibrated config"
    with tempfile.TemporaryDirectory(prefix="pytest-trt-qerr-") as tmp:
        qdq = Path(tmp) / "model.qdq.onnx"
        qdq.write_bytes(bm.data)
        with GoldenFile(golden) as g:
            if not g.has_dataset:
                return f"{golden} holds no golden dataset"
            n = min(SAMPLES, g.samples)
            return measure(bm.float_path, qdq, batches_of(g.inputs(), n, n))


def _db(v: float | None) -> float | None:
    return None if v is None or v == float("inf") else round(float(v), 2)


def quant_errors_review(review: ConfigReview, *, cache_dir: Path | None = None,
                        golden_dir: Path | None = None) -> dict[str, Any] | None:
    """The section of one regressed config; None when NEW's pin has no calibration."""
    from pytest_trt.errors import TrtError
    from pytest_trt.upgrade.built_models import calibration_of

    new, old = review.new, review.old
    if new is None or old is None or new.bundle is None or calibration_of(new) is None:
        return None
    golden = _golden_path(new, golden_dir)
    if isinstance(golden, str):
        return {"computed": False, "reason": golden}
    try:
        errors_new = _measure(new, golden, cache_dir)
        errors_old = _measure(old, golden, cache_dir) if calibration_of(old) is not None else None
    except (OSError, ValueError, KeyError, TrtError, ImportError) as exc:
        return {"computed": False, "reason": f"the measurement failed ({exc})"}
    if isinstance(errors_new, str):
        return {"computed": False, "reason": f"NEW: {errors_new}"}
    old_db = ({t.tensor: t.sqnr_db for t in errors_old.tensors} if errors_old is not None
              and not isinstance(errors_old, str) else {})
    tensors = [{"tensor": t.tensor, "kind": t.kind, "new_db": _db(t.sqnr_db), "old_db": _db(old_db.get(t.tensor)),
                "clipped": t.clipped, "rel_l2": t.rel_l2} for t in errors_new.tensors[:TOP]]
    name = str(new.bundle.config.get("pinned", {}).get("name") or new.name)
    return {"computed": True, "samples": errors_new.samples, "seconds": round(errors_new.seconds, 3),
            "golden": str(golden), "tensors": tensors,
            "old_not_measured": errors_old if isinstance(errors_old, str) else None,
            "nodes": [{"node": n, "sqnr_db": _db(s)} for n, s in errors_new.ranked_nodes()[:NODES]],
            "search": f"pytest-trt calib search PINS.toml {name} --golden {golden}"}


def summary_line(qe: Mapping[str, Any]) -> str:
    """The terminal's line: the worst tensor, OLD's dB beside NEW's, and the node to leave in float first."""
    if not qe.get("computed"):
        return f"quantization errors not computed: {qe.get('reason')}"
    top = qe["tensors"][0] if qe.get("tensors") else None
    if top is None:
        return "quantization errors: no quantized tensor"
    old = "-" if top["old_db"] is None else f"{top['old_db']:.1f}"
    node = qe["nodes"][0]["node"] if qe.get("nodes") else "-"
    return (f"quantization error ({qe['samples']} samples): worst {top['tensor']} {top['new_db']} dB "
            f"(OLD {old} dB); leave in float first: {node}; then {qe['search']}")


def quant_errors_report(report: UpgradeReport, *, cache_dir: Path | None = None,
                        golden_dir: Path | None = None) -> UpgradeReport:
    """The report with the quantization errors of every regressed calibrated config."""
    reviews = tuple(
        dataclasses.replace(r, quant_errors=quant_errors_review(r, cache_dir=cache_dir, golden_dir=golden_dir))
        if r.verdict == REGRESSION else r for r in report.reviews)
    return dataclasses.replace(report, reviews=reviews)
