"""TensorRT <= 10 implicit INT8: one calibrator class per algorithm, fed through the device-buffer layer.

TensorRT's Python calibrators are subclasses of ``trt.IInt8EntropyCalibrator2``,
``IInt8EntropyCalibrator``, ``IInt8MinMaxCalibrator`` or ``IInt8LegacyCalibrator``
(deprecated in TensorRT 10.1, removed in 11) implementing ``get_batch_size``,
``get_batch(names)`` (device pointers, or None when done),
``read_calibration_cache`` and ``write_calibration_cache``.  The subclasses are
made at run time from the imported module, so this file imports no TensorRT;
the batch feeding (:class:`BatchFeeder`) and the cache I/O (:class:`CacheIO`)
are plain classes, usable and tested without a GPU.  The calibrator classes themselves, which need
TensorRT and the device-buffer layer, are :mod:`pytest_trt.backends.trt_calibrator`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pytest_trt.buildlog.calibcache import HEADER_ALGORITHMS, algorithm_of_header, write_calibration_cache

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
    """The calibrator's cache: read when the file exists and was written by this algorithm, written atomically."""

    path: Path | None
    algorithm: str
    events: list[str] = field(default_factory=list)

    def read(self) -> bytes | None:
        if self.path is None or not self.path.is_file():
            self.events.append("cache absent: calibrating")
            return None
        data = self.path.read_bytes()
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


def check_pinned_cache(config: BuildConfig) -> None:
    """After an implicit-INT8 build: the cache file must hash to the pinned ``cache_sha256``."""
    from pytest_trt.common.fileio import sha256_file
    from pytest_trt.errors import BuildFailed

    calib = config.calibration
    if calib is None or calib.cache_sha256 is None or calib.cache is None:
        return
    path = Path(calib.cache)
    got = sha256_file(path) if path.is_file() else "(no cache written)"
    if got != calib.cache_sha256:
        raise BuildFailed(
            f"BuildConfig {config.name!r}: calibration cache {str(path)!r} sha256 is {got}, the config pins "
            f"cache_sha256={calib.cache_sha256}. Compare the caches (pytest_trt.calibration.compare_caches); "
            "if the new scales are approved, pin the new hash.",
            config_name=config.name, stage="calibration", obtained=got, expected=calib.cache_sha256)
