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
import warnings
import zipfile
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


class _Source:
    """Where the samples being loaded come from: the config that pins them and its data source, for errors."""

    def __init__(self, calibration: Calibration, config_name: str | None) -> None:
        self.calibration = calibration
        self.config_name = config_name

    def prefix(self) -> str:
        who = f"BuildConfig {self.config_name!r}: " if self.config_name else ""
        return f"{who}Calibration.data {describe_data(self.calibration.data)!r}: "

    def error(self, why: str) -> ConfigError:
        return ConfigError(self.prefix() + why, field="calibration.data")


#: the name bare ``.npy`` arrays are digested under (the model's single input, whose name the ONNX pins)
BARE = "?"


def _input(key: str) -> str:
    return "input (the model's single input)" if key == BARE else f"input {key!r}"


#: samples checked for NaN/Inf at a time
_CHUNK = 256
#: one array of one input and where it came from (a file, an HDF5 dataset, a callable's batch)
_Part = tuple[np.ndarray, str]


def _check_part(src: _Source, key: str, array: np.ndarray, origin: str) -> None:
    """One loaded array: samples on axis 0, finite values (NaN and Inf make no range)."""
    if key == LABELS:
        return
    if array.ndim == 0:
        raise src.error(f"{origin}: {_input(key)} is a scalar; calibration data needs samples on axis 0")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.complexfloating)):
        return
    n, bad = array.shape[0], list[int]()
    for start in range(0, n, _CHUNK):  # in chunks: the mask of a whole large set would double its memory
        block = array[start : start + _CHUNK].reshape(min(_CHUNK, n - start), -1)
        bad.extend(start + int(i) for i in np.flatnonzero(~np.isfinite(block).all(axis=1)))
    if bad:
        what = "NaN" if np.isnan(array[bad[0]]).any() else "Inf"
        raise src.error(f"{origin}: {_input(key)} sample {bad[0]} holds {what} ({len(bad)} of {n} samples are "
                        "not finite); NaN and Inf give no calibration range: fix or drop those samples")


def _join(parts: dict[str, list[_Part]], src: _Source, source: str, *, warn: bool) -> CalibrationSamples:
    joined: dict[str, np.ndarray] = {}
    for key, arrays in parts.items():
        for array, origin in arrays:
            _check_part(src, key, array, origin)
        try:
            joined[key] = np.concatenate([a for a, _ in arrays], axis=0) if len(arrays) > 1 else arrays[0][0]
        except ValueError as exc:
            raise src.error(f"the arrays of {key!r} in {source} cannot be stacked along axis 0 ({exc})") from None
    labels = joined.pop(LABELS, None)
    if not joined:
        raise src.error(f"{source} holds no input arrays (only labels)")
    sizes = {k: v.shape[0] if v.ndim else None for k, v in joined.items()}
    if None in sizes.values() or len(set(sizes.values())) != 1:
        raise src.error(f"every input needs the same number of samples on axis 0; got {sizes} in {source}")
    n = next(iter(sizes.values()))
    if not n:
        raise src.error(f"{source} holds 0 samples of {', '.join(map(_input, sorted(joined)))} (shape "
                        f"{next(iter(joined.values())).shape}); calibration needs at least one sample")
    if warn:
        for key, array in joined.items():
            if not np.any(array):
                warnings.warn(f"{src.prefix()}{_input(key)} is all zero in {source}: every range is 0, so "
                              "the INT8 scales are 0; check the calibration data", UserWarning, stacklevel=4)
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
            raise src.error(f"labels must be {n} integers, got shape {labels.shape} dtype {labels.dtype} in {source}")
    return CalibrationSamples(joined, labels, source)


def _from_glob(src: _Source, pattern: str, input_name: str | None, *, warn: bool) -> CalibrationSamples:
    paths = sorted(Path(p) for p in glob.glob(pattern, recursive=True))
    paths = [p for p in paths if p.suffix in (".npy", ".npz")]
    if not paths:
        from pytest_trt.common.relpaths import describe_rule

        raise src.error(f"matches no .npy or .npz file ({describe_rule()})")
    parts: dict[str, list[_Part]] = {}
    for path in paths:
        try:
            loaded = np.load(path, allow_pickle=False)
            arrays = [(loaded, None)] if isinstance(loaded, np.ndarray) else None
            if arrays is None:
                with loaded as npz:
                    arrays = [(npz[key], key) for key in npz.files]
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            empty = " (an empty file)" if path.is_file() and path.stat().st_size == 0 else ""
            raise src.error(f"{path} is not a readable numpy file{empty} ({type(exc).__name__}: {exc}); "
                            "write it with numpy.save / numpy.savez") from None
        for array, key in arrays:
            if key is None and input_name is None:
                raise src.error(f"{path} is a bare .npy array, but the model has several inputs; "
                                "use .npz files keyed by input name")
            name = input_name if key is None else key
            assert name is not None
            parts.setdefault(name, []).append((array, str(path) if key is None else f"{path}[{key!r}]"))
    return _join(parts, src, f"{len(paths)} file(s) matching {pattern!r}", warn=warn)


def _from_hdf5(src: _Source, path: str, *, warn: bool) -> CalibrationSamples:
    import h5py

    if not Path(path).is_file():
        raise src.error(f"HDF5 file {path} does not exist")
    parts: dict[str, list[_Part]] = {}
    try:
        with h5py.File(path, "r") as fh:
            group: Any = fh["inputs"] if "inputs" in fh and isinstance(fh["inputs"], h5py.Group) else fh
            for key, item in group.items():
                if isinstance(item, h5py.Dataset):
                    parts[key] = [(item[()], f"{path}:{item.name}")]
            if LABELS in fh and isinstance(fh[LABELS], h5py.Dataset) and LABELS not in parts:
                parts[LABELS] = [(fh[LABELS][()], f"{path}:/{LABELS}")]
    except (OSError, KeyError, ValueError, RuntimeError) as exc:
        raise src.error(f"HDF5 file {path} cannot be read ({type(exc).__name__}: {exc}); it is damaged or not an "
                        "HDF5 file: write it again with h5py") from None
    return _join(parts, src, f"HDF5 file {path}", warn=warn)


def _from_callable(src: _Source, fn: Any, input_name: str | None, *, warn: bool) -> CalibrationSamples:
    parts: dict[str, list[_Part]] = {}
    for i, batch in enumerate(fn()):
        if isinstance(batch, np.ndarray):
            if input_name is None:
                raise src.error(f"batch {i} is a bare array, but the model has several inputs; "
                                "yield {input name: array} dicts")
            batch = {input_name: batch}
        if not isinstance(batch, Mapping):
            raise src.error(f"batch {i} is a {type(batch).__name__}; yield {{input name: array}} dicts")
        for key, value in batch.items():
            parts.setdefault(str(key), []).append((np.asarray(value), f"batch {i}"))
    if not parts:
        raise src.error("the callable yielded no batches")
    return _join(parts, src, describe_data(fn) or "no data", warn=warn)


def load_samples(calibration: Calibration, *, input_name: str | None = None, config_name: str | None = None,
                 warn: bool = False) -> CalibrationSamples:
    """Every calibration sample of ``calibration``, checked (samples on axis 0, finite values).

    ``input_name``: the model's only input, for bare arrays; ``config_name``: the config that pins the data, named
    in every error; ``warn``: warn about an input that is all zero (the calibrating paths ask, the digest does not).
    """
    data = calibration.data
    src = _Source(calibration, config_name)
    if data is None:
        who = f"BuildConfig {config_name!r}: " if config_name else ""
        raise ConfigError(f"{who}Calibration.data is not set: give a glob of .npy/.npz files, an HDF5 file, a "
                          "GoldenDataset or a callable yielding batches", field="calibration.data")
    if isinstance(data, str):
        if data.endswith(HDF5_SUFFIXES):
            return _from_hdf5(src, data, warn=warn)
        return _from_glob(src, data, input_name, warn=warn)
    if hasattr(data, "inputs") and hasattr(data, "digest"):  # GoldenDataset
        labels = getattr(data, "labels", None)
        source = f"GoldenDataset ({data.n} samples)"
        parts = {k: [(np.asarray(v), f"{source} input {k!r}")] for k, v in dict(data.inputs).items()}
        samples = _join(parts, src, source, warn=warn)
        return CalibrationSamples(samples.inputs, labels, source)
    return _from_callable(src, data, input_name, warn=warn)


def pinned_samples(calibration: Calibration, *, input_name: str | None = None,
                   config_name: str | None = None) -> CalibrationSamples:
    """The samples the pin uses: :func:`load_samples` cut to ``num_batches`` batches of ``batch_size``."""
    return load_samples(calibration, input_name=input_name, config_name=config_name, warn=True).used(
        calibration.batch_size, calibration.num_batches)


def data_digest(calibration: Calibration, *, config_name: str | None = None) -> str:
    """sha256 of the samples (names, dtypes, shapes, bytes, labels): the calibration data's part of the config hash.

    Bare ``.npy`` arrays are hashed under the name ``"?"``: the input name is the model's, which the
    ONNX bytes already pin.
    """
    return load_samples(calibration, input_name=BARE, config_name=config_name).digest()


def check_model_inputs(samples: CalibrationSamples, inputs: Mapping[str, tuple[np.dtype[Any], tuple[int | None, ...]]],
                       calibration: Calibration, *, config_name: str | None, model: str) -> None:
    """The samples fit the model's inputs (``{name: (dtype, dims)}``, None for a dynamic dim), or a clear error.

    Names must match exactly (no missing, no extra), dtypes must equal the model's, and every static dim after
    the batch axis must match.
    """
    src = _Source(calibration, config_name)
    have, want = set(samples.inputs), set(inputs)
    if have != want:
        missing, extra = sorted(want - have), sorted(have - want)
        parts = ([f"has no data for input(s) {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"holds {', '.join(map(repr, extra))}, which {model} has no input of that name"] if extra else [])
        raise src.error(f"{samples.source} {'; '.join(parts)}. {model} takes {', '.join(map(repr, sorted(want)))}: "
                        "key the arrays (.npz keys, HDF5 datasets, dict keys) by those input names")
    for name in sorted(want):
        array = samples.inputs[name]
        dtype, dims = inputs[name]
        if array.dtype != dtype:
            raise src.error(f"input {name!r} in {samples.source} is {array.dtype}, but {model} takes {dtype}: "
                            f"convert the data (array.astype(numpy.{dtype}))")
        ok = array.ndim == len(dims) and all(
            d is None or d == s for d, s in zip(dims[1:], array.shape[1:], strict=True))
        if not ok:
            shown = "(" + ", ".join("N" if i == 0 else "?" if d is None else str(d) for i, d in enumerate(dims)) + ")"
            raise src.error(f"input {name!r} in {samples.source} has samples of shape {array.shape}, but {model} "
                            f"takes {shown} (N samples): reshape the data or fix the model's input")


def onnx_interface(
    onnx_path: str | Path,
) -> tuple[dict[str, tuple[np.dtype[Any], tuple[int | None, ...]]], frozenset[str]]:
    """The model's inputs ``{name: (dtype, dims)}`` (None for a dynamic dim), and every tensor name it has."""
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    model = onnx.load(str(onnx_path), load_external_data=False)
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    inputs: dict[str, tuple[np.dtype[Any], tuple[int | None, ...]]] = {}
    for value in graph.input:
        if value.name in inits:
            continue
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        inputs[value.name] = (np.dtype(tensor_dtype_to_np_dtype(tensor.elem_type)), dims)
    tensors = {*inits, *(v.name for v in graph.input), *(v.name for v in graph.output)}
    tensors.update(name for node in graph.node for name in (*node.input, *node.output) if name)
    return inputs, frozenset(tensors)


def model_samples(calibration: Calibration, onnx_path: str | Path, *,
                  config_name: str | None) -> tuple[CalibrationSamples, frozenset[str]]:
    """The pinned samples of ``calibration``, checked against the model's inputs, and every tensor name it has."""
    inputs, tensors = onnx_interface(onnx_path)
    samples = pinned_samples(calibration, input_name=next(iter(inputs)) if len(inputs) == 1 else None,
                             config_name=config_name)
    check_model_inputs(samples, inputs, calibration, config_name=config_name, model=str(onnx_path))
    return samples, tensors
