"""TensorRT <= 10 implicit INT8: run-time subclasses of TensorRT's ``IInt8*Calibrator`` classes and their feeding.

TensorRT's Python calibrators are subclasses of ``trt.IInt8EntropyCalibrator2``,
``IInt8EntropyCalibrator``, ``IInt8MinMaxCalibrator`` or ``IInt8LegacyCalibrator``
(deprecated in TensorRT 10.1, removed in 11) implementing ``get_batch_size``,
``get_batch(names)`` (device pointers, or None when done),
``read_calibration_cache`` and ``write_calibration_cache``.  The subclasses are
made at run time from the imported module, so this file imports no TensorRT;
the batch feeding (:class:`BatchFeeder`) and the cache I/O (:class:`CacheIO`)
are plain classes, usable and tested without a GPU.  It lives with the backends because it needs the CUDA layer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pytest_trt.buildlog.calibcache import (
    HEADER_ALGORITHMS,
    algorithm_of_header,
    check_cache_pin,
    refuse_directory,
    write_calibration_cache,
)

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig

#: algorithm -> TensorRT calibrator base class
CALIBRATOR_CLASSES = {
    "entropy2": "IInt8EntropyCalibrator2",
    "entropy": "IInt8EntropyCalibrator",
    "minmax": "IInt8MinMaxCalibrator",
    "legacy": "IInt8LegacyCalibrator",
}
#: CalibrationAlgoType member name -> algorithm
ALGO_TYPES = {
    "ENTROPY_CALIBRATION_2": "entropy2",
    "ENTROPY_CALIBRATION": "entropy",
    "MINMAX_CALIBRATION": "minmax",
    "LEGACY_CALIBRATION": "legacy",
}
#: IInt8LegacyCalibrator parameters (TensorRT's samples use these)
LEGACY_QUANTILE = 0.9999
LEGACY_REGRESSION_CUTOFF = 1.0


class DeviceBufferLike(Protocol):
    """What :class:`BatchFeeder` needs of :class:`pytest_trt.backends.cuda.DeviceBuffer`."""

    ptr: int

    def upload(self, array: np.ndarray, stream: Any) -> None: ...


class StreamLike(Protocol):
    def synchronize(self) -> None: ...


class BatchFeeder:
    """Hands TensorRT one batch at a time as device pointers, in the order TensorRT names the inputs.

    Every batch must hold exactly ``batch_size`` samples (TensorRT's calibration batch size is fixed): a
    shorter last batch is dropped and counted in ``dropped``.
    """

    def __init__(
        self,
        batches: Iterable[Mapping[str, np.ndarray]],
        *,
        batch_size: int,
        buffer_factory: Callable[[], DeviceBufferLike],
        stream: StreamLike,
        dtypes: Mapping[str, np.dtype[Any]] | None = None,
    ) -> None:
        self._batches = iter(batches)
        self.batch_size = batch_size
        self._factory = buffer_factory
        self._stream = stream
        self._dtypes = dict(dtypes or {})
        self._buffers: dict[str, DeviceBufferLike] = {}
        self.fed = 0
        self.dropped = 0

    def next_pointers(self, names: Sequence[str]) -> list[int] | None:
        """Upload the next batch; return one device pointer per name, or None when the data is exhausted."""
        for batch in self._batches:
            sizes = {len(v) for v in batch.values()}
            if sizes != {self.batch_size}:
                self.dropped += 1
                continue
            missing = [n for n in names if n not in batch]
            if missing:
                raise KeyError(f"calibration batch {self.fed} has no input {missing[0]!r} "
                               f"(it has {', '.join(sorted(batch))}); TensorRT asks for {', '.join(names)}")
            pointers = []
            for name in names:
                array = np.ascontiguousarray(batch[name], dtype=self._dtypes.get(name, np.float32))
                buf = self._buffers.get(name)
                if buf is None:
                    buf = self._buffers[name] = self._factory()
                buf.upload(array, self._stream)
                pointers.append(int(buf.ptr))
            self._stream.synchronize()
            self.fed += 1
            return pointers
        return None


@dataclass
class CacheIO:
    """The calibrator's cache: read when the file exists, was written by this algorithm and hashes to the pin
    (``pinned``: the config's ``cache_sha256``), written atomically."""

    path: Path | None
    algorithm: str
    events: list[str] = field(default_factory=list)
    pinned: str | None = None

    def read(self) -> bytes | None:
        if self.path is None or not self.path.is_file():
            self.events.append("cache absent: calibrating")
            return None
        data = self.path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if self.pinned is not None and digest != self.pinned:  # TensorRT never sees scales the pin does not name
            self.events.append(f"cache refused: {self.path} sha256 {digest}, the config pins {self.pinned}")
            return None
        header = data.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
        found = algorithm_of_header(header)
        if found != self.algorithm:
            self.events.append(f"cache ignored: {self.path} has header {header!r}, the calibrator is "
                               f"{HEADER_ALGORITHMS[self.algorithm]}")
            return None
        self.events.append(f"cache read: {self.path} ({header})")
        return data

    def write(self, data: bytes) -> None:
        if self.path is None:
            return
        write_calibration_cache(self.path, data.decode("utf-8"))
        self.events.append(f"cache written: {self.path} sha256 {hashlib.sha256(data).hexdigest()}")


def check_pinned_cache(config: BuildConfig, *, before_build: bool = False) -> None:
    """The cache file must hash to the pinned ``cache_sha256``.

    ``before_build``: the check before TensorRT's calibrator may read the file, so a cache the pin does not name
    fails the build before any scale of it is used; a missing file is then fine (the calibrator writes one, checked
    after the build).
    """
    calib = config.calibration
    if calib is None or calib.cache is None:
        return
    path = Path(calib.cache)
    refuse_directory(config.name, path)
    if calib.cache_sha256 is None:
        return
    if before_build and not path.is_file():
        return
    got = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "(no cache written)"
    check_cache_pin(config.name, got, calib.cache_sha256, path=path)


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

    Before anything reaches TensorRT: an existing cache file must hash to the pinned ``cache_sha256``, and the
    calibration data must fit the model's inputs (names, dtypes, static dims).
    With dynamic shapes the first optimization profile is the calibration profile, set explicitly rather than
    left to TensorRT's "Calibration Profile is not defined. Calibrating with Profile 0" fallback.
    """
    from pytest_trt.common.calibration_data import model_samples

    calib = config.calibration
    assert calib is not None
    check_pinned_cache(config, before_build=True)
    samples, _ = model_samples(calib, config.onnx, config_name=config.name)
    from pytest_trt.backends.cuda import DeviceBuffer, Stream

    batches = samples.batches(calib.batch_size)
    feeder = BatchFeeder(batches, batch_size=calib.batch_size,
                         buffer_factory=DeviceBuffer, stream=Stream())
    cache = CacheIO(Path(calib.cache) if calib.cache is not None else None, calib.algorithm,
                    pinned=calib.cache_sha256)
    calibrator = make_calibrator(trt, calib.algorithm, feeder, cache)
    builder_config.int8_calibrator = calibrator
    if profiles and hasattr(builder_config, "set_calibration_profile"):
        builder_config.set_calibration_profile(profiles[0])
    info = {"class": CALIBRATOR_CLASSES[calib.algorithm], "algorithm": reported_algorithm(calibrator),
            "batch_size": calib.batch_size, "samples": samples.n,
            "class_counts": {str(k): v for k, v in samples.class_counts().items()},
            "cache_events": cache.events}  # the same list: filled in while TensorRT calibrates
    return calibrator, info
