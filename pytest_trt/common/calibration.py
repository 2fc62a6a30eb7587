"""The INT8 calibration pin, :class:`Calibration`: what a config fixes about calibrating, validated on construction.

It carries only what is pinned (algorithm, data source, batching, cache path and hash); what is computed
from it, the data's digest first, is :mod:`pytest_trt.calibration`'s work, done once per build request.
A value type, like :class:`~pytest_trt.common.profile.Profile`: the config module holds it without
importing the calibration package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.common import relpaths
from pytest_trt.errors import ConfigError

CALIBRATION_ALGORITHMS = ("entropy", "entropy2", "minmax", "legacy", "percentile", "distribution")
#: TensorRT <= 10 calibrator classes (implicit INT8), by algorithm name.
IMPLICIT_CALIBRATORS = ("entropy2", "entropy", "minmax", "legacy")
#: Explicit Q/DQ quantization methods (TensorRT-RTX, TensorRT 11, ONNX Runtime).
EXPLICIT_METHODS = ("minmax", "entropy", "percentile", "distribution")


@dataclass(frozen=True)
class Calibration:
    """INT8 calibration, pinned: algorithm, data, batching, cache.

    ``algorithm``: ``entropy2``, ``entropy``, ``minmax``, ``legacy`` name the
    TensorRT <= 10 calibrators (implicit INT8); ``minmax``, ``entropy``,
    ``percentile``, ``distribution`` the explicit Q/DQ quantization that
    TensorRT-RTX, TensorRT 11 and ONNX Runtime build (ranges computed the way
    TensorRT's calibrators compute them, see :mod:`pytest_trt.calibration`).

    ``data``: a glob of ``.npy``/``.npz`` files (relative to the pytest
    rootdir in a session, else the current directory, or to the TOML file;
    :mod:`pytest_trt.common.relpaths`), a ``GoldenDataset``, an HDF5 file
    (``.h5``/``.hdf5``) or a callable returning an iterable of batches
    (``{input name: array}``).  A ``labels`` array (npz key, HDF5 dataset,
    GoldenDataset labels) is counted per class, never fed.
    ``num_batches``: use only the first N batches (None: all).
    ``percentile``: for ``percentile`` only (default 99.999).
    ``per_channel``: per-output-channel weight scales (explicit quantization).
    ``cache``: TensorRT-format calibration cache path (read when it exists
    and was written by the same algorithm, written otherwise).
    ``cache_sha256``: pins that cache's bytes; a mismatch fails the build.
    ``exclude_nodes``: ONNX node names left in float by explicit quantization (the Q/DQ path on every
    backend: ONNX Runtime's quantizer ``nodes_to_exclude``); stored sorted and unique.  ``pytest-trt calib
    search`` finds a set that makes a golden pass and writes it.

    The config hash covers every field and the calibration data's digest,
    not the data or cache *paths* (moving a repository keeps its pins).
    """

    algorithm: str = "entropy2"
    data: Any = None
    cache: str | Path | None = None
    batch_size: int = 1
    num_batches: int | None = None
    percentile: float | None = None
    per_channel: bool = False
    cache_sha256: str | None = None
    exclude_nodes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"Calibration.{name}: {why}", field=f"calibration.{name}")

        if self.algorithm not in CALIBRATION_ALGORITHMS:
            raise ConfigError(f"Calibration.algorithm {self.algorithm!r} is unknown; choose one of "
                              f"{', '.join(CALIBRATION_ALGORITHMS)}", field="calibration.algorithm")
        for name in ("batch_size", "num_batches"):
            v = getattr(self, name)
            if v is None and name == "num_batches":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, f"must be a positive int, got {v!r}")
        if self.percentile is not None:
            if self.algorithm != "percentile":
                raise bad("percentile", f"applies only to algorithm='percentile', not {self.algorithm!r}; remove it")
            if isinstance(self.percentile, bool) or not isinstance(self.percentile, (int, float)) or not (
                50.0 < float(self.percentile) <= 100.0
            ):
                raise bad("percentile", f"must be a number in (50, 100], like 99.99, got {self.percentile!r}")
            object.__setattr__(self, "percentile", float(self.percentile))
        if not isinstance(self.per_channel, bool):
            raise bad("per_channel", f"must be True or False, got {self.per_channel!r}")
        if self.per_channel and self.algorithm in IMPLICIT_CALIBRATORS and self.algorithm not in EXPLICIT_METHODS:
            raise bad("per_channel", f"applies to explicit Q/DQ quantization, not to the {self.algorithm} calibrator")
        if self.cache is not None:
            if not isinstance(self.cache, (str, Path)) or not str(self.cache):
                raise bad("cache", f"must be a file path, got {self.cache!r}")
            cache = relpaths.resolve(self.cache)
            object.__setattr__(self, "cache", cache)
            if cache.is_dir():
                raise bad("cache", f"{str(cache)!r} is a directory; give the path of the cache file, like "
                          f"{str(cache / 'calibration.cache')!r}")
        if self.cache_sha256 is not None:
            if not isinstance(self.cache_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", self.cache_sha256):
                raise bad("cache_sha256", f"must be 64 lowercase hex digits (sha256sum of the cache), got "
                          f"{self.cache_sha256!r}")
            if self.cache is None:
                raise bad("cache_sha256", "pins a cache file, so give cache= too")
        object.__setattr__(self, "exclude_nodes", _node_names(self.exclude_nodes, self.algorithm))
        data = self.data
        if data is None:
            return
        if isinstance(data, (str, Path)) and str(data):  # a glob or an HDF5 path, under the path rule
            object.__setattr__(self, "data", str(relpaths.resolve(data)))
        elif not isinstance(data, str) and not callable(data) and not hasattr(data, "digest"):
            raise bad("data", f"expected a glob of .npy/.npz files, an HDF5 path, a GoldenDataset or a callable "
                      f"returning batches, got {type(data).__name__}")
        if isinstance(self.data, str) and not self.data:
            raise bad("data", "is an empty path; give a glob like 'calib/*.npy'")

    @property
    def explicit(self) -> bool:
        """Whether the algorithm names an explicit (Q/DQ) method rather than only a TensorRT calibrator."""
        return self.algorithm in EXPLICIT_METHODS

    def describe_data(self) -> str | None:
        """The data source as the config JSON names it (a path or glob, a callable's name, a data set's size)."""
        from pytest_trt.common.calibration_data import describe_data

        return describe_data(self.data)

    def to_json(self, data_sha256: str | None = None) -> dict[str, Any]:
        """Every field as JSON, with the data's digest as computed for it (None without data)."""
        return {
            "algorithm": self.algorithm,
            "data": self.describe_data(),
            "data_sha256": data_sha256,
            "cache": str(self.cache) if self.cache is not None else None,
            "cache_sha256": self.cache_sha256,
            "batch_size": self.batch_size,
            "num_batches": self.num_batches,
            "percentile": self.percentile,
            "per_channel": self.per_channel,
            # only when set: every config calibrated without exclusions keeps its config hash
            **({"exclude_nodes": list(self.exclude_nodes)} if self.exclude_nodes else {}),
        }

    def canonical(self, data_sha256: str | None = None) -> dict[str, Any]:
        """:meth:`to_json` without the paths: the samples enter by digest, the cache by whether there is one."""
        data = self.to_json(data_sha256)
        data["data"] = None if isinstance(self.data, str) else data["data"]
        data["cache"] = self.cache is not None
        return data



def _node_names(value: Any, algorithm: str) -> tuple[str, ...]:
    """``exclude_nodes`` as a sorted tuple of unique, non-empty node names (a lone string is one name)."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"Calibration.exclude_nodes: expected a list of ONNX node names like "
                          f"['/block1/block1.0/Conv'], got {value!r}", field="calibration.exclude_nodes")
    if names and algorithm not in EXPLICIT_METHODS:
        raise ConfigError(f"Calibration.exclude_nodes applies to explicit Q/DQ quantization "
                          f"({', '.join(EXPLICIT_METHODS)}), not to the {algorithm} calibrator",
                          field="calibration.exclude_nodes")
    return tuple(sorted(set(names)))
