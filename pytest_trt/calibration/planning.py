"""Which calibration path a TensorRT-family module takes, and what it refuses (versions as data).

* TensorRT <= 10 (INT8 builder flag and ``IInt8*Calibrator`` classes): implicit INT8 with a calibrator
  per algorithm (:mod:`pytest_trt.calibration.implicit`).
* TensorRT-RTX and TensorRT 11 (strongly typed, no calibrators): explicit Q/DQ quantization
  (:mod:`pytest_trt.calibration.building`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_trt.config import EXPLICIT_METHODS, IMPLICIT_CALIBRATORS

if TYPE_CHECKING:
    from pytest_trt.backends.trt_features import Features
    from pytest_trt.config import BuildConfig
    from pytest_trt.errors import UnsupportedOption

#: (module, highest major.minor) that cannot build INT8 Q/DQ models, with what was measured.
EXPLICIT_INT8_BROKEN: tuple[tuple[str, tuple[int, int], str], ...] = (
    ("tensorrt_rtx", (1, 4),
     "measured with 1.4.0.76 on a Q/DQ MobileNetV2: buildSerializedNetwork fails with a Myelin "
     "'CHECK(dtype == myelinTypeFloat || ...)' internal error; 1.7.1 builds it with Int8 layers"),
)


def _major_minor(version: str) -> tuple[int, int]:
    parts = (version.split(".") + ["0"])[:2]
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        return (0, 0)


def explicit_int8_broken(f: Features) -> str | None:
    """Why this module cannot build INT8 Q/DQ models, or None."""
    for module, upto, why in EXPLICIT_INT8_BROKEN:
        if f.module == module and _major_minor(f.version) <= upto:
            return why
    return None


def check_calibration(
    config: BuildConfig, f: Features, product: str, refuse: Callable[[str, str], UnsupportedOption]
) -> BuildConfig:
    """Refuse a calibration this module cannot honour; return the config as the builder will see it."""
    calib = config.calibration
    assert calib is not None
    if f.calibrators_usable:
        if calib.algorithm not in IMPLICIT_CALIBRATORS:
            raise refuse("calibration.algorithm",
                         f"{product} calibrates implicit INT8 with its calibrators: choose one of "
                         f"{', '.join(IMPLICIT_CALIBRATORS)} (not {calib.algorithm!r})")
        return config
    if calib.algorithm not in EXPLICIT_METHODS:
        raise refuse("calibration.algorithm",
                     f"{product} has no INT8 calibrators (strongly typed: implicit quantization was removed), so "
                     f"{calib.algorithm!r} cannot run; pytest-trt quantizes the ONNX with explicit Q/DQ nodes "
                     f"instead: choose one of {', '.join(EXPLICIT_METHODS)}")
    broken = explicit_int8_broken(f)
    if broken is not None:
        raise refuse("calibration",
                     f"{product} cannot build INT8 Q/DQ models ({broken}); upgrade to TensorRT-RTX 1.7 "
                     "(pip install 'tensorrt-rtx>=1.7') or build this config with --trt-backend onnxruntime")
    return config.replace(precision="typed", calibration=None)
