"""INT8 calibration under test: pinned data and algorithm, ranges, Q/DQ models, TensorRT-format caches.

* the pin itself, :class:`Calibration`, is a value of :mod:`pytest_trt.common.calibration` (re-exported here);
* :mod:`.data`: calibration samples from globs, HDF5, a GoldenDataset or a callable;
* :mod:`.ranges`: activation ranges from ONNX Runtime's calibrators set up like TensorRT's;
* :mod:`.qdq`: the Q/DQ model TensorRT-RTX / TensorRT 11 / ONNX Runtime build;
* :mod:`.explicit`: the whole explicit path for a BuildConfig, stored by content;
* TensorRT <= 10 implicit INT8 (calibrator classes): :mod:`pytest_trt.backends.trt_calibrator`;
* cache files: :mod:`pytest_trt.buildlog.calibcache` (read, write, compare).

Importing this package imports neither onnxruntime nor tensorrt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.buildlog.calibcache import (
        CacheComparison,
        CalibrationCache,
        compare_caches,
        format_calibration_cache,
        parse_calibration_cache,
        read_calibration_cache,
        write_calibration_cache,
    )
    from pytest_trt.buildlog.calibfacts import CalibrationFacts, calibration_facts
    from pytest_trt.common.calibration import Calibration
    from pytest_trt.errors import CalibrationCacheError

#: re-exported on first use: the engine provider imports ``.store`` from every pytest session, and
#: importing this package must not load the buildlog parser then (start-up cost)
_LAZY = {
    "CalibrationCacheError": "pytest_trt.errors",
    "Calibration": "pytest_trt.common.calibration",
    **dict.fromkeys(("CacheComparison", "CalibrationCache", "compare_caches",
                     "format_calibration_cache", "parse_calibration_cache", "read_calibration_cache",
                     "write_calibration_cache"), "pytest_trt.buildlog.calibcache"),
    **dict.fromkeys(("CalibrationFacts", "calibration_facts"), "pytest_trt.buildlog.calibfacts"),
}


def __getattr__(name: str) -> Any:
    from pytest_trt.common.package import lazy_attribute

    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "CacheComparison",
    "Calibration",
    "CalibrationCache",
    "CalibrationCacheError",
    "CalibrationFacts",
    "calibration_facts",
    "compare_caches",
    "format_calibration_cache",
    "parse_calibration_cache",
    "read_calibration_cache",
    "write_calibration_cache",
]
