"""What a backend does with a calibrated config: one code path for TensorRT-RTX, TensorRT 11 and ONNX Runtime.

Strongly typed builders take INT8 from Q/DQ nodes, so a config with
``precision='int8'`` and an explicit :class:`~pytest_trt.common.calibration.Calibration`
is built as the Q/DQ model (``precision='typed'``), and the result is put
back under the pinned config: same config JSON, config hash and ONNX
sha256, with the calibration facts in ``extra``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig

#: BuildResult.extra keys
CALIBRATION = "calibration"
CALIBRATION_CACHE = "calibration_cache"
QDQ_SHA256 = "qdq_model_sha256"


def typed_config(config: BuildConfig, qdq_model: Path) -> BuildConfig:
    """The config a strongly typed builder really builds: the Q/DQ model, precision from its types."""
    return config.replace(onnx=qdq_model, precision="typed", calibration=None)


def build_explicit(
    config: BuildConfig, build: Callable[[BuildConfig], BuildResult], *, onnx_sha256: str, data_sha256: str | None
) -> BuildResult:
    """Calibrate (or take the stored calibration), build the Q/DQ model with ``build``, re-pin the result.

    ``onnx_sha256`` and ``data_sha256`` are the build request's digests of the ONNX file and the calibration data.
    """
    from pytest_trt.calibration.explicit import calibrate_explicit

    onnx_sha = onnx_sha256
    outcome = calibrate_explicit(config, onnx_sha256=onnx_sha, data_sha256=data_sha256)
    built = build(typed_config(config, outcome.qdq_model))
    info = dict(outcome.info)
    seconds = 0.0 if outcome.from_store else float(info.get("seconds", {}).get("total", 0.0))
    effective = {**built.effective_config, "precision": config.precision, "quantization": "explicit-qdq",
                 "calibration_algorithm": info["algorithm"]}
    extra = {**built.extra, CALIBRATION: {**info, "from_store": outcome.from_store},
             CALIBRATION_CACHE: outcome.cache_text, QDQ_SHA256: info["qdq_model_sha256"]}
    return dataclasses.replace(
        built, config=config.to_json(data_sha256), config_hash=config.hash_with(onnx_sha, data_sha256),
        onnx_sha256=onnx_sha,
        effective_config=effective, extra=extra, durations={**built.durations, "calibration": seconds},
    )


def built_onnx(result: BuildResult, config: BuildConfig) -> Path:
    """The ONNX file the engine was built from: the stored Q/DQ model for a calibrated build, else the config's."""
    if CALIBRATION not in result.extra or config.calibration is None:
        return config.onnx
    from pytest_trt.calibration.explicit import calibrate_explicit

    pinned = result.config.get("calibration") or {}  # the digest the build's request computed
    outcome = calibrate_explicit(config, onnx_sha256=result.onnx_sha256, data_sha256=pinned.get("data_sha256"))
    if outcome.info["qdq_model_sha256"] != result.extra.get(QDQ_SHA256):
        raise ValueError(f"BuildConfig {config.name!r}: the stored Q/DQ model ({outcome.info['qdq_model_sha256']}) "
                         f"is not the one the engine was built from ({result.extra.get(QDQ_SHA256)}); rebuild the "
                         "engine (--trt-engine-rebuild)")
    return outcome.qdq_model


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
