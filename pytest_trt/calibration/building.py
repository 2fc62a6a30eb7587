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
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig

#: BuildResult.extra keys
CALIBRATION = "calibration"
CALIBRATION_CACHE = "calibration_cache"
QDQ_SHA256 = "qdq_model_sha256"


class Pinned(Protocol):
    """What the explicit path reads of a build request (a :class:`~pytest_trt.backends.request.BuildRequest`)."""

    @property
    def config(self) -> BuildConfig: ...
    @property
    def onnx_sha256(self) -> str: ...
    @property
    def data_sha256(self) -> str | None: ...
    @property
    def config_hash(self) -> str: ...
    @property
    def config_json(self) -> dict[str, Any]: ...


def build_explicit(request: Pinned, build: Callable[[BuildConfig], BuildResult]) -> BuildResult:
    """Calibrate once for ``request`` (or take the stored calibration), build the Q/DQ model, re-pin the result.

    The request's digests (ONNX, calibration data) and its config JSON and hash are used as computed: the result
    is recorded under the pinned config, with the calibration facts in ``extra``.
    """
    from pytest_trt.calibration.explicit import calibrate_explicit

    outcome = calibrate_explicit(request.config, onnx_sha256=request.onnx_sha256, data_sha256=request.data_sha256)
    built = build(outcome.typed_config)
    info = dict(outcome.info)
    seconds = 0.0 if outcome.from_store else float(info.get("seconds", {}).get("total", 0.0))
    effective = {**built.effective_config, "precision": request.config.precision, "quantization": "explicit-qdq",
                 "calibration_algorithm": info["algorithm"]}
    extra = {**built.extra, CALIBRATION: {**info, "from_store": outcome.from_store},
             CALIBRATION_CACHE: outcome.cache_text, QDQ_SHA256: info["qdq_model_sha256"]}
    return dataclasses.replace(
        built, config=request.config_json, config_hash=request.config_hash, onnx_sha256=request.onnx_sha256,
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
