"""The calibration facts a built result carries: their ``extra`` keys and the record's ``quantization``.

The explicit path (:class:`pytest_trt.calibration.explicit.ExplicitCalibration`) puts them in a result's
``extra``; TensorRT <= 10's calibrator reports its own in ``effective_config``; both are read here.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog.record import BuildRecord

#: BuildResult.extra keys
CALIBRATION = "calibration"
CALIBRATION_CACHE = "calibration_cache"
QDQ_SHA256 = "qdq_model_sha256"


def quantization_facts(result: BuildResult) -> dict[str, Any]:
    """``BuildRecord.quantization`` for a result: the calibration facts pytest-trt recorded, if any."""
    info = result.extra.get(CALIBRATION)
    implicit = result.effective_config.get("calibrator")
    if not isinstance(info, dict) and isinstance(implicit, dict):  # TensorRT <= 10: the calibrator's own report
        return {"algorithm": implicit.get("algorithm"), "mode": "implicit", "calibrator": implicit.get("class"),
                "samples": implicit.get("samples"), "class_counts": implicit.get("class_counts"),
                "cache_events": implicit.get("cache_events")}
    if not isinstance(info, dict):
        return {}
    return {k: info.get(k) for k in ("algorithm", "mode", "quantizer", "cache_header", "cache_sha256", "ranges",
                                     "samples", "batches", "class_counts", "qdq_model_sha256", "ranges_source")}


def attach(record: BuildRecord, result: BuildResult) -> BuildRecord:
    """``record`` with the build's calibration facts in ``quantization``."""
    facts = quantization_facts(result)
    return dataclasses.replace(record, quantization=facts) if facts else record
