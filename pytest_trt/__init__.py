"""pytest-trt: TensorRT engine regression testing.

Build engines under pinned configs with the full builder log captured, assert
on fusions and precisions, compare outputs with HDF5 golden snapshots, and
keep an audit bundle of every engine.  Importing this package imports no
TensorRT, ONNX Runtime or h5py.
"""

from __future__ import annotations

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

    # the assertion forms, typed from their definitions (star-imported names count as exported)
    from pytest_trt.engines.assertions import *  # noqa: F403
    from pytest_trt.engines.engine import Engine
    from pytest_trt.golden.dataset import GoldenDataset

from pytest_trt.common.package import __version__, lazy_attribute

#: public names imported on first use: loading the plugin (every pytest run in the environment,
#: trt marker or not) must stay cheap, and GoldenDataset needs numpy
_LAZY = {
    "GoldenDataset": "pytest_trt.golden.dataset",
    **dict.fromkeys(("BuildConfig", "Calibration", "OrtOptions", "Profile"), "pytest_trt.config"),
    "Engine": "pytest_trt.engines.engine",
    **dict.fromkeys(("BuildResult", "LogEntry"), "pytest_trt.artifact"),
}
#: the module of the ``assert_*`` names, one per registered record assertion
_ASSERTIONS = "pytest_trt.engines.assertions"


def _assertion_names() -> list[str]:
    from pytest_trt.buildlog.registry import REGISTRY
    from pytest_trt.engines import assertions  # noqa: F401  (its import makes the forms of every definition)

    return list(REGISTRY)


def __getattr__(name: str) -> Any:
    if name.startswith("assert_"):
        return lazy_attribute(__name__, dict.fromkeys(_assertion_names(), _ASSERTIONS), name)
    if name == "__all__":
        return [*_PUBLIC, *_assertion_names()]
    return lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_assertion_names()})


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
]
# __all__ is completed on first use with the assertion names, which come from their registry: loading the
# plugin must not import it (static tools read the list above and the star import)
_PUBLIC = tuple(__all__)
if not TYPE_CHECKING:
    del __all__
