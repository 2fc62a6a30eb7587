"""pytest-trt: TensorRT engine regression testing.

Build engines under pinned configs with the full builder log captured, assert
on fusions and precisions, compare outputs with HDF5 golden snapshots, and
keep an audit bundle of every engine.  Importing this package imports no
TensorRT, ONNX Runtime or h5py.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pytest_trt.errors import (
    BackendUnavailable,
    BuildFailed,
    BundleIntegrityError,
    ConfigError,
    EngineNotRunnable,
    GoldenCorrupt,
    GoldenMissing,
    GoldenTainted,
    InputMismatch,
    TrtError,
    UnsupportedOption,
)

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult, LogEntry
    from pytest_trt.config import BuildConfig, Calibration, OrtOptions, Profile
    from pytest_trt.engines.assertions import (
        assert_calibration,
        assert_calibration_coverage,
        assert_dynamic_range,
        assert_fused,
        assert_int8,
        assert_layer_count,
        assert_no_fusion,
        assert_no_warning,
        assert_precision,
        assert_warning,
    )
    from pytest_trt.engines.engine import Engine
    from pytest_trt.golden.dataset import GoldenDataset

__version__ = "0.1.0"

#: public names imported on first use: loading the plugin (every pytest run in the environment,
#: trt marker or not) must stay cheap, and GoldenDataset needs numpy
_LAZY = {
    "GoldenDataset": "pytest_trt.golden.dataset",
    **dict.fromkeys(("BuildConfig", "Calibration", "OrtOptions", "Profile"), "pytest_trt.config"),
    "Engine": "pytest_trt.engines.engine",
    **dict.fromkeys(("BuildResult", "LogEntry"), "pytest_trt.artifact"),
    **dict.fromkeys(("assert_calibration", "assert_calibration_coverage", "assert_dynamic_range", "assert_fused",
                     "assert_int8", "assert_layer_count", "assert_no_fusion", "assert_no_warning",
                     "assert_precision", "assert_warning"), "pytest_trt.engines.assertions"),
}


def lazy_attribute(package: str, table: Mapping[str, str], name: str) -> Any:
    """PEP 562 re-export for this package and its subpackages: ``name`` from the module ``table`` names for it.

    Kept here, in the module every pytest run loads anyway, so that resolving (or refusing) a name costs no import.
    """
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)

__all__ = [
    "BackendUnavailable",
    "BuildConfig",
    "BuildFailed",
    "BuildResult",
    "BundleIntegrityError",
    "Calibration",
    "ConfigError",
    "Engine",
    "EngineNotRunnable",
    "GoldenCorrupt",
    "GoldenDataset",
    "GoldenMissing",
    "GoldenTainted",
    "InputMismatch",
    "LogEntry",
    "OrtOptions",
    "Profile",
    "TrtError",
    "UnsupportedOption",
    "__version__",
    "assert_calibration",
    "assert_calibration_coverage",
    "assert_dynamic_range",
    "assert_fused",
    "assert_int8",
    "assert_layer_count",
    "assert_no_fusion",
    "assert_no_warning",
    "assert_precision",
    "assert_warning",
]
