"""Calibration samples: one loader for every source a :class:`~pytest_trt.common.calibration.Calibration` accepts.

Sources: a glob of ``.npy`` (one array per file, for the model's single
input) or ``.npz`` files (keys are input names), an HDF5 file (root datasets,
or an ``inputs`` group), a ``GoldenDataset``, or a callable returning an
iterable of ``{input: array}`` batches.  A ``labels`` array is split off and
counted per class (calibration coverage); it is never fed to the model.
Samples are concatenated along axis 0 and re-cut into ``batch_size`` batches,
so the batching is the pin's, whatever the files hold.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pytest_trt.common.samples import samples_digest
from pytest_trt.errors import ConfigError


class Calibration(Protocol):
    """What the loader reads of a :class:`~pytest_trt.common.calibration.Calibration` pin."""

    @property
    def data(self) -> Any: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def num_batches(self) -> int | None: ...

LABELS = "labels"
HDF5_SUFFIXES = (".h5", ".hdf5")


@dataclass(frozen=True, eq=False)
class CalibrationSamples:
    """All calibration samples of one config: ``inputs`` ``{name: (N, ...)}``, optional ``labels`` ``(N,)``."""

    inputs: Mapping[str, np.ndarray]
    labels: np.ndarray | None
    source: str

    @property
    def n(self) -> int:
        return int(next(iter(self.inputs.values())).shape[0])

    def batches(self, batch_size: int, num_batches: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Consecutive batches of ``batch_size`` samples (the last may be shorter), at most ``num_batches``."""
        count = 0
        for start in range(0, self.n, batch_size):
            if num_batches is not None and count >= num_batches:
                return
            yield {k: v[start : start + batch_size] for k, v in self.inputs.items()}
            count += 1

    def used(self, batch_size: int, num_batches: int | None) -> CalibrationSamples:
        """The samples the pin actually uses (``num_batches`` cuts the set)."""
        if num_batches is None:
            return self
        stop = batch_size * num_batches
        labels = None if self.labels is None else self.labels[:stop]
        return CalibrationSamples({k: v[:stop] for k, v in self.inputs.items()}, labels, self.source)

    def class_counts(self) -> dict[int, int]:
        """Samples per class label (empty without labels)."""
        if self.labels is None:
            return {}
        values, counts = np.unique(self.labels, return_counts=True)
        return {int(v): int(c) for v, c in zip(values, counts, strict=True)}

    def digest(self) -> str:
        """:func:`~pytest_trt.common.samples.samples_digest` of the inputs by name, and the labels."""
        return samples_digest(sorted(self.inputs.items()), self.labels)


def describe_data(data: Any) -> str | None:
    """A data source as the config JSON names it: a path or glob, a callable's name, a data set's size."""
    if data is None or isinstance(data, str):
        return data
    if callable(data):
        return f"callable {getattr(data, '__module__', '?')}.{getattr(data, '__qualname__', type(data).__name__)}"
    return f"{type(data).__name__} ({getattr(data, 'n', '?')} samples)"


def _error(calibration: Calibration, why: str) -> ConfigError:
    return ConfigError(f"Calibration.data {describe_data(calibration.data)!r}: {why}", field="calibration.data")


def _join(parts: dict[str, list[np.ndarray]], calibration: Calibration, source: str) -> CalibrationSamples:
    joined: dict[str, np.ndarray] = {}
    for key, arrays in parts.items():
        try:
            joined[key] = np.concatenate(arrays, axis=0) if len(arrays) > 1 else arrays[0]
        except ValueError as exc:
            raise _error(calibration, f"the arrays of {key!r} cannot be stacked along axis 0 ({exc})") from None
    labels = joined.pop(LABELS, None)
    if not joined:
        raise _error(calibration, f"{source} holds no input arrays (only labels)")
    sizes = {k: v.shape[0] if v.ndim else None for k, v in joined.items()}
    if None in sizes.values() or len(set(sizes.values())) != 1:
        raise _error(calibration, f"every input needs the same number of samples on axis 0; got {sizes}")
    n = next(iter(sizes.values()))
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
            raise _error(calibration, f"labels must be {n} integers, got shape {labels.shape} dtype {labels.dtype}")
    return CalibrationSamples(joined, labels, source)


def _from_glob(calibration: Calibration, pattern: str, input_name: str | None) -> CalibrationSamples:
    paths = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
    paths = [p for p in paths if p.suffix in (".npy", ".npz")]
    if not paths:
        raise _error(calibration, f"matches no .npy or .npz file (relative paths resolve against {Path.cwd()})")
    parts: dict[str, list[np.ndarray]] = {}
    for path in paths:
        try:
            loaded = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise _error(calibration, f"{path} is not a readable numpy file ({exc})") from None
        if isinstance(loaded, np.ndarray):
            if input_name is None:
                raise _error(calibration, f"{path} is a bare .npy array, but the model has several inputs; "
                             "use .npz files keyed by input name")
            parts.setdefault(input_name, []).append(loaded)
        else:
            with loaded as npz:
                for key in npz.files:
                    parts.setdefault(key, []).append(npz[key])
    return _join(parts, calibration, f"{len(paths)} file(s) matching {pattern!r}")


def _from_hdf5(calibration: Calibration, path: str) -> CalibrationSamples:
    import h5py

    if not Path(path).is_file():
        raise _error(calibration, f"HDF5 file {path} does not exist")
    parts: dict[str, list[np.ndarray]] = {}
    with h5py.File(path, "r") as fh:
        group: Any = fh["inputs"] if "inputs" in fh and isinstance(fh["inputs"], h5py.Group) else fh
        for key, item in group.items():
            if isinstance(item, h5py.Dataset):
                parts[key] = [item[()]]
        if LABELS in fh and isinstance(fh[LABELS], h5py.Dataset) and LABELS not in parts:
            parts[LABELS] = [fh[LABELS][()]]
    return _join(parts, calibration, f"HDF5 file {path}")


def _from_callable(calibration: Calibration, fn: Any, input_name: str | None) -> CalibrationSamples:
    parts: dict[str, list[np.ndarray]] = {}
    for i, batch in enumerate(fn()):
        if isinstance(batch, np.ndarray):
            if input_name is None:
                raise _error(calibration, f"batch {i} is a bare array, but the model has several inputs; "
                             "yield {input name: array} dicts")
            batch = {input_name: batch}
        if not isinstance(batch, Mapping):
            raise _error(calibration, f"batch {i} is a {type(batch).__name__}; yield {{input name: array}} dicts")
        for key, value in batch.items():
            parts.setdefault(str(key), []).append(np.asarray(value))
    if not parts:
        raise _error(calibration, "the callable yielded no batches")
    return _join(parts, calibration, describe_data(fn) or "no data")


def load_samples(calibration: Calibration, *, input_name: str | None = None) -> CalibrationSamples:
    """Every calibration sample of ``calibration`` (``input_name``: the model's only input, for bare arrays)."""
    data = calibration.data
    if data is None:
        raise ConfigError("Calibration.data is not set: give a glob of .npy/.npz files, an HDF5 file, a "
                          "GoldenDataset or a callable yielding batches", field="calibration.data")
    if isinstance(data, str):
        if data.endswith(HDF5_SUFFIXES):
            return _from_hdf5(calibration, data)
        return _from_glob(calibration, data, input_name)
    if hasattr(data, "inputs") and hasattr(data, "digest"):  # GoldenDataset
        labels = getattr(data, "labels", None)
        return CalibrationSamples(dict(data.inputs), labels, f"GoldenDataset ({data.n} samples)")
    return _from_callable(calibration, data, input_name)


def pinned_samples(calibration: Calibration, *, input_name: str | None = None) -> CalibrationSamples:
    """The samples the pin uses: :func:`load_samples` cut to ``num_batches`` batches of ``batch_size``."""
    return load_samples(calibration, input_name=input_name).used(calibration.batch_size, calibration.num_batches)


def data_digest(calibration: Calibration) -> str:
    """sha256 of the samples (names, dtypes, shapes, bytes, labels): the calibration data's part of the config hash.

    Bare ``.npy`` arrays are hashed under the name ``"?"``: the input name is the model's, which the
    ONNX bytes already pin.
    """
    return load_samples(calibration, input_name="?").digest()
