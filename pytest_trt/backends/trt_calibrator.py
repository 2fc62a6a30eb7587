"""TensorRT <= 10 implicit INT8 calibrators: run-time subclasses of TensorRT's ``IInt8*Calibrator`` classes.

A calibrator feeds device buffers (:mod:`pytest_trt.backends.cuda`) from a
:class:`~pytest_trt.calibration.implicit.BatchFeeder` and keeps its cache through a
:class:`~pytest_trt.calibration.implicit.CacheIO`; the class is made from the imported module at
run time, so this file imports no TensorRT.  It lives with the backends because it needs the CUDA layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.calibration.implicit import (
    ALGO_TYPES,
    CALIBRATOR_CLASSES,
    LEGACY_QUANTILE,
    LEGACY_REGRESSION_CUTOFF,
    BatchFeeder,
    CacheIO,
)

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig


def make_calibrator(trt: Any, algorithm: str, feeder: BatchFeeder, cache: CacheIO) -> Any:
    """An instance of a run-time subclass of TensorRT's calibrator class for ``algorithm``."""
    base = getattr(trt, CALIBRATOR_CLASSES[algorithm])

    def __init__(self: Any) -> None:
        base.__init__(self)

    def get_batch_size(self: Any) -> int:
        return feeder.batch_size

    def get_batch(self: Any, names: list[str], *args: Any) -> list[int] | None:
        return feeder.next_pointers(names)

    def read_calibration_cache(self: Any, *args: Any) -> bytes | None:
        return cache.read()

    def write_calibration_cache(self: Any, data: Any, *args: Any) -> None:
        cache.write(bytes(memoryview(data)))

    members: dict[str, Any] = {
        "__init__": __init__, "get_batch_size": get_batch_size, "get_batch": get_batch,
        "read_calibration_cache": read_calibration_cache, "write_calibration_cache": write_calibration_cache,
    }
    if algorithm == "legacy":
        members.update(get_quantile=lambda self: LEGACY_QUANTILE,
                       get_regression_cutoff=lambda self: LEGACY_REGRESSION_CUTOFF,
                       read_histogram_cache=lambda self, *a: None, write_histogram_cache=lambda self, *a: None)
    cls = type(f"PytestTrt{CALIBRATOR_CLASSES[algorithm][1:]}", (base,), members)
    return cls()


def reported_algorithm(calibrator: Any) -> str | None:
    """The algorithm the calibrator reports to TensorRT (``get_algorithm()``), as an algorithm name."""
    value = calibrator.get_algorithm()
    name = getattr(value, "name", str(value).rsplit(".", 1)[-1])
    return ALGO_TYPES.get(name)


def attach_calibrator(
    trt: Any, builder_config: Any, config: BuildConfig, profiles: Sequence[Any] = ()
) -> tuple[Any, dict[str, Any]]:
    """Set a calibrator for ``config`` on ``builder_config``; return it (keep it alive) and its facts.

    With dynamic shapes the first optimization profile is the calibration profile, set explicitly rather than
    left to TensorRT's "Calibration Profile is not defined. Calibrating with Profile 0" fallback.
    """
    from pytest_trt.backends.cuda import DeviceBuffer, Stream
    from pytest_trt.common.calibration_data import pinned_samples

    calib = config.calibration
    assert calib is not None
    samples = pinned_samples(calib)
    batches = samples.batches(calib.batch_size)
    feeder = BatchFeeder(batches, batch_size=calib.batch_size,
                         buffer_factory=DeviceBuffer, stream=Stream())
    cache = CacheIO(Path(calib.cache) if calib.cache is not None else None, calib.algorithm)
    calibrator = make_calibrator(trt, calib.algorithm, feeder, cache)
    builder_config.int8_calibrator = calibrator
    if profiles and hasattr(builder_config, "set_calibration_profile"):
        builder_config.set_calibration_profile(profiles[0])
    info = {"class": CALIBRATOR_CLASSES[calib.algorithm], "algorithm": reported_algorithm(calibrator),
            "batch_size": calib.batch_size, "samples": samples.n,
            "class_counts": {str(k): v for k, v in samples.class_counts().items()},
            "cache_events": cache.events}  # the same list: filled in while TensorRT calibrates
    return calibrator, info
