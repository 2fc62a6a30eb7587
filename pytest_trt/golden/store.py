"""The golden HDF5 file: layout, a read-only view, and the writers used inside an update.

One file per model, ``<golden_dir>/<config.name>.h5``::

    /                      attrs format, schema
    /dataset               attrs samples, sha256
    /dataset/inputs/<name> (N, ...)          no filter (see INPUT_FILTERS)
    /dataset/labels        (N,) int64        optional
    /dataset/tags          (N,) utf-8        optional, "" = no tag, commas separate several
    /snapshots/<config>    attrs generation, provenance (JSON), baselines (JSON)
        outputs/<escaped>  (N, ...)          no filter (see OUTPUT_FILTERS); attr name: the output's name
        record             uint8 JSON bytes  the normalized BuildRecord
    /history/<config>/gen-<NNNN>             earlier snapshots, moved here unchanged
    /approvals             (K,) utf-8 JSON   one approval record per refresh

Every input, labels, tags, output and record dataset has a ``sha256`` attribute
(:func:`pytest_trt.golden.integrity.array_digest`, ``text_digest`` for tags), checked on every
read of a check.  An output's link name is its name with ``%``, ``/`` and a leading ``.`` escaped
(``%25``, ``%2F``, ``%2E``): names such as ``out/y`` (tf2onnx) stay one dataset.  Files written
before that stored ``out/y`` as group ``out`` and dataset ``y``; readers take both.  The whole
file's sha256 is in ``<config>.h5.sha256`` beside it (:mod:`pytest_trt.golden.integrity`).

Compressed datasets are chunked (whole samples, about 1 MiB a chunk), unfiltered
ones contiguous; every dataset is created with ``track_times=False`` and every
attribute is written in a fixed order, so identical content gives identical
bytes.  h5py is imported here only; the pytest hook module never imports this.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from pytest_trt.compare.render import update_command
from pytest_trt.errors import FolderUnusable, GoldenCorrupt, GoldenError
from pytest_trt.golden import integrity
from pytest_trt.golden.dataset import GoldenDataset, dataset_digest
from pytest_trt.golden.provenance import Provenance

FORMAT = "pytest-trt-golden"
SCHEMA = 1
CHUNK_BYTES = 1 << 20
#: Filters chosen per kind of data by measurement (benchmarks/bench_codecs.py on real
#: MobileNetV2 outputs and normalized images; write / read MB/s, size):
#: 1000-class logits: every filter keeps >= 85% of the bytes (zstd-1 ~1000 / 760-1480,
#: 92.5%; blosc-lz4+shuffle 880-1270 / 2000-4900, 86.5%; lzf 100%; gzip 40-70 / 280-780);
#: feature maps halve (zstd-1 46.6% at 250-500 / 600-1170; gzip-1 48.7% at 60-90 /
#: 200-370; lzf 54.8%); images shrink to 36.8% with gzip-1 (no shuffle: 75% with it) but
#: decode at 290-500 MB/s (zstd-1: 59.5%, ~1070; lzf: 49.7%, ~680).  Unfiltered,
#: contiguous data writes at 1.9-3.7 GB/s and reads at 5-12 GB/s, and the golden check
#: must run at >= 1 GB/s and within 5% of a bare session.run loop: a 1.2 GB image
#: dataset decoded at <= 1.1 GB/s costs 1-4 s of CPU per check.  So inputs and outputs
#: are stored unfiltered (and hdf5plugin, zstd's filter, is not a dependency: a file
#: written with it would not read where it is not installed).  Files written with the
#: earlier filters (gzip-4 + shuffle inputs, lzf outputs) read unchanged: h5py decodes
#: whatever filter a dataset declares.
INPUT_FILTERS: dict[str, Any] = {}
OUTPUT_FILTERS: dict[str, Any] = {}
#: labels and tags are small and compress well
LABEL_FILTERS: dict[str, Any] = {"compression": "gzip", "compression_opts": 1}
_STR = h5py.string_dtype("utf-8")


def folder_error(folder: Path, exc: OSError | None = None) -> FolderUnusable:
    """The golden folder is a file, or cannot be written (read-only checkout, permissions)."""
    if folder.exists() and not folder.is_dir():
        what = "is a file, not a folder: remove or rename it"
    else:
        what = f"cannot be written ({exc.strerror if exc else 'read-only'}): make it writable"
    return FolderUnusable(
        f"golden folder {folder} {what}, or point --trt-golden-dir / trt_golden_dir at a writable folder. "
        "Checks only read it; an approved update (--trt-update-golden) writes the file, its lock and APPROVALS.jsonl",
        path=folder,
    )


def corrupt_error(path: Path, exc: BaseException) -> GoldenCorrupt:
    return GoldenCorrupt(
        f"golden file {path} cannot be read ({type(exc).__name__}: {exc}); it is corrupt or truncated and was "
        f"left untouched. Restore it from version control (git checkout -- {path}), or move it away and "
        f"recreate the golden dataset, then the snapshot with: {update_command()}",
        path=str(path),
    )


@contextmanager
def guard(path: Path) -> Iterator[None]:
    """Turn h5py's errors on a damaged file (OSError, KeyError, ...) into :class:`GoldenCorrupt`."""
    try:
        yield
    except GoldenError:
        raise
    except (OSError, KeyError, ValueError, TypeError, RuntimeError, json.JSONDecodeError) as exc:
        raise corrupt_error(path, exc) from exc


def chunks_for(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...] | bool:
    """Chunks of whole samples, about :data:`CHUNK_BYTES` each (the unit a batch reads)."""
    if not shape or shape[0] == 0:
        return True
    row = int(np.prod(shape[1:], dtype=np.int64)) * itemsize
    if row > 4 * CHUNK_BYTES:
        return True  # one sample is larger than a sensible chunk: let h5py split it
    return (max(1, min(shape[0], CHUNK_BYTES // max(row, 1))), *shape[1:])


def create_array(group: h5py.Group, name: str, shape: tuple[int, ...], dtype: Any, filters: Mapping[str, Any],
                 data: np.ndarray | None = None) -> h5py.Dataset:
    """A dataset of ``shape``: chunked when ``filters`` compress it, contiguous otherwise.

    Unfiltered data gains nothing from chunks, and a batch that ends inside a chunk made
    HDF5 write the chunk, evict it and read it back to finish it: contiguous storage
    wrote 1000-class logits 1.2-3.7x faster in batches of 256.
    """
    dt = np.dtype(dtype) if dtype is not _STR else dtype
    chunks = chunks_for(shape, dt.itemsize) if filters else None
    return group.create_dataset(name, shape=shape, dtype=dt, data=data, chunks=chunks, track_times=False, **filters)


def _json_attr(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SnapshotView:
    """One snapshot inside an open file: outputs stay on disk until sliced."""

    config: str
    generation: int
    provenance: Provenance
    baselines: dict[str, Any]
    outputs: Mapping[str, h5py.Dataset]
    group: h5py.Group

    def record_json(self) -> str | None:
        return bytes(self.group["record"][()]).decode("utf-8") if "record" in self.group else None


def snapshot_view(config: str, group: h5py.Group) -> SnapshotView:
    """A :class:`SnapshotView` of a snapshot group (current or history).

    Raises ValueError naming the snapshot and attribute when an attribute has the wrong
    type (callers run it under :func:`guard`, which names the file).
    """
    return SnapshotView(
        config=config,
        generation=_int_attr(config, group, "generation"),
        provenance=Provenance.from_dict(_provenance_attr(config, group)),
        baselines=_object_attr(config, group, "baselines"),
        outputs=output_datasets(group),
        group=group,
    )


def escape_name(name: str) -> str:
    """An output name as one HDF5 link name: ``%``, ``/`` and a leading ``.`` percent-escaped."""
    text = name.replace("%", "%25").replace("/", "%2F")
    return "%2E" + text[1:] if text.startswith(".") else text


def output_datasets(snapshot: h5py.Group) -> dict[str, h5py.Dataset]:
    """``{output name: dataset}`` of a snapshot group: the ``name`` attribute, else the path under ``outputs/``.

    Files written before names were escaped hold ``out/y`` as group ``out``, dataset ``y``.
    """
    found: dict[str, h5py.Dataset] = {}

    def visit(path: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            name = obj.attrs.get("name", path)
            found[name.decode("utf-8") if isinstance(name, bytes) else str(name)] = obj

    snapshot["outputs"].visititems(visit)
    return found


def _object_attr(config: str, group: h5py.Group, name: str) -> dict[str, Any]:
    value = json.loads(group.attrs[name])
    if not isinstance(value, dict):
        raise ValueError(f"snapshot {config!r}: attribute {name} is a JSON {type(value).__name__}, not an object")
    return value


def _int_attr(config: str, group: h5py.Group, name: str) -> int:
    value = group.attrs[name]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"snapshot {config!r}: attribute {name} is {value!r}, not an integer")
    return int(value)


def _provenance_attr(config: str, group: h5py.Group) -> dict[str, Any]:
    """The provenance object, each field of :class:`Provenance` present (unless defaulted) and a string."""
    from dataclasses import MISSING, fields

    value = _object_attr(config, group, "provenance")
    for f in fields(Provenance):
        if f.name not in value:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"snapshot {config!r}: provenance has no {f.name!r}")
            continue
        if not isinstance(value[f.name], str) and value[f.name] is not None:
            raise ValueError(
                f"snapshot {config!r}: provenance {f.name!r} is {value[f.name]!r}, not a string"
            )
    return value


def validate(f: h5py.File, path: Path) -> None:
    """Raise unless ``f`` is a golden file this version can read."""
    if f.attrs.get("format") != FORMAT:
        raise KeyError(f"attribute format is not {FORMAT!r}: not a pytest-trt golden file")
    if int(f.attrs["schema"]) > SCHEMA:
        raise GoldenError(f"golden file {path} has schema {f.attrs['schema']}, newer than "
                          f"this pytest-trt reads ({SCHEMA}); upgrade pytest-trt", path=str(path))


class GoldenFile:
    """A golden file opened read-only: ``with GoldenFile(path) as g: g["config"].outputs["logits"]``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f: h5py.File | None = None
        #: the file's sha256 when its digest file named it (None: no digest file; the file was read in a child first)
        self.sha256: str | None = None
        self._verifier: integrity.BlockVerifier | None = None

    def __enter__(self) -> GoldenFile:
        # h5py reads only checked bytes: a damaged file can make it hang.  The whole file is hashed first, or
        # h5py reads through a verifier that gives it each block once it matches its approved digest.
        self.sha256, self._verifier = integrity.open_checked(self.path)
        try:
            with guard(self.path):
                self._f = h5py.File(self._verifier.reader() if self._verifier else self.path, "r")
                try:
                    validate(self._f, self.path)
                except BaseException:
                    self._f.close()
                    self._f = None
                    raise
        except BaseException as exc:
            self._close_verifier(exc)
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        self._close_verifier(ev)

    def _close_verifier(self, error: BaseException | None) -> None:
        """Every block checked (a clean exit) or the block mismatch raised in place of ``error`` (h5py's read of it
        failing); the verifier closed either way."""
        verifier, self._verifier = self._verifier, None
        if verifier is None:
            return
        try:
            if error is None:
                verifier.finish()
            elif verifier.failure is not None:
                raise verifier.error() from None
        finally:
            verifier.close()

    @property
    def h5(self) -> h5py.File:
        if self._f is None:
            raise RuntimeError("GoldenFile is not open; use it as a context manager")
        return self._f

    @property
    def has_dataset(self) -> bool:
        return "dataset" in self.h5

    @property
    def samples(self) -> int:
        return int(self.h5["dataset"].attrs["samples"])

    @property
    def dataset_sha256(self) -> str:
        return str(self.h5["dataset"].attrs["sha256"])

    def inputs(self) -> Mapping[str, h5py.Dataset]:
        return dict(self.h5["dataset/inputs"].items())

    def labels(self) -> np.ndarray | None:
        return self.h5["dataset/labels"][()] if "dataset/labels" in self.h5 else None

    def tags(self) -> tuple[str, ...] | None:
        if "dataset/tags" not in self.h5:
            return None
        return tuple(t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in self.h5["dataset/tags"][()])

    def small_parts_edited(self, snapshot: SnapshotView) -> list[str]:
        """Labels, tags and the snapshot's record whose bytes differ from their stored digest (read whole: small)."""
        parts: list[tuple[str, Any, Any]] = []
        if "dataset/labels" in self.h5:
            ds = self.h5["dataset/labels"]
            parts.append(("labels", ds, lambda: integrity.array_digest(ds)))
        if "dataset/tags" in self.h5:
            tags = self.tags()
            parts.append(("tags", self.h5["dataset/tags"], lambda: integrity.text_digest(tags or ())))
        if "record" in snapshot.group:
            rec = snapshot.group["record"]
            parts.append((f"snapshot {snapshot.config!r} record", rec, lambda: integrity.array_digest(rec)))
        edited = []
        for what, ds, digest in parts:
            stored = ds.attrs.get(integrity.DIGEST_ATTR)
            if stored is not None and str(stored) != digest():
                edited.append(what)
        return edited

    def dataset_edited(self) -> bool:
        """For files without per-input digests: whether the stored samples differ from ``/dataset`` ``sha256``."""
        inputs = self.inputs()
        if all(integrity.DIGEST_ATTR in ds.attrs for ds in inputs.values()):
            return False
        return dataset_digest(sorted(inputs.items()), self.labels(), self.tags()) != self.dataset_sha256

    def load_dataset(self) -> GoldenDataset:
        """The whole dataset in memory (small curated sets; checks stream instead)."""
        with guard(self.path):
            return GoldenDataset({k: v[()] for k, v in self.inputs().items()}, self.labels(), self.tags())

    def __iter__(self) -> Iterator[str]:
        return iter(self.h5["snapshots"]) if "snapshots" in self.h5 else iter(())

    def __contains__(self, config: object) -> bool:
        return isinstance(config, str) and f"snapshots/{config}" in self.h5

    def __getitem__(self, config: str) -> SnapshotView:
        if config not in self:
            raise KeyError(config)
        with guard(self.path):
            return snapshot_view(config, self.h5["snapshots"][config])

    def history(self, config: str) -> tuple[SnapshotView, ...]:
        """Earlier generations of ``config``, oldest first."""
        if f"history/{config}" not in self.h5:
            return ()
        with guard(self.path):
            group = self.h5["history"][config]
            return tuple(snapshot_view(config, group[k]) for k in sorted(group))

    def approvals(self) -> tuple[dict[str, Any], ...]:
        if "approvals" not in self.h5:
            return ()
        with guard(self.path):
            return tuple(json.loads(t) for t in self.h5["approvals"].asstr()[()])


# -- writers: called on the temporary copy inside atomic.update() -------------

def init_file(f: h5py.File) -> None:
    f.attrs["format"] = FORMAT
    f.attrs["schema"] = SCHEMA


def write_dataset(f: h5py.File, dataset: GoldenDataset) -> None:
    """Write (or replace) ``/dataset``; replacing leaves snapshots tainted by the new sha256."""
    if "dataset" in f:
        del f["dataset"]
    group = f.create_group("dataset")
    inputs = group.create_group("inputs")
    for name, arr in dataset.inputs.items():
        create_array(inputs, name, arr.shape, arr.dtype, INPUT_FILTERS, data=arr).attrs[integrity.DIGEST_ATTR] = \
            integrity.array_digest(arr)
    if dataset.labels is not None:
        labels = dataset.labels.astype(np.int64)
        create_array(group, "labels", labels.shape, np.int64, LABEL_FILTERS,
                     data=labels).attrs[integrity.DIGEST_ATTR] = integrity.array_digest(labels)
    if dataset.tags is not None:
        create_array(group, "tags", (dataset.n,), _STR, {"compression": "gzip"},
                     data=np.array(dataset.tags, dtype=object)).attrs[integrity.DIGEST_ATTR] = \
            integrity.text_digest(dataset.tags)
    group.attrs["samples"] = dataset.n
    group.attrs["sha256"] = dataset_digest(inputs.items(), dataset.labels, dataset.tags)


def begin_snapshot(f: h5py.File, config: str) -> tuple[h5py.Group, int]:
    """Move the current snapshot of ``config`` to history; return a new group and its generation."""
    snaps = f.require_group("snapshots")
    generation = 1
    if config in snaps:
        old = snaps[config]
        generation = int(old.attrs["generation"]) + 1
        history = f.require_group("history").require_group(config)
        f.move(old.name, f"{history.name}/gen-{generation - 1:04d}")
    group = snaps.create_group(config)
    group.create_group("outputs")
    return group, generation


def check_finite(name: str, start: int, arr: np.ndarray) -> None:
    """Refuse NaN/Inf outputs for an approved snapshot: a golden of NaN compares as nothing."""
    if not np.issubdtype(arr.dtype, np.floating) or arr.size == 0:
        return
    if np.isfinite(arr.min()) and np.isfinite(arr.max()):  # two reductions, no boolean copy of the batch
        return
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)) if arr.ndim else ~np.isfinite(arr)
    if not bad.any():
        return
    rows = np.flatnonzero(bad.any(axis=1)) + start if arr.ndim else np.array([start])
    shown = ", ".join(str(int(r)) for r in rows[:10]) + (" ..." if rows.size > 10 else "")
    raise GoldenError(
        f"output {name!r} has {int(bad.sum())} NaN/Inf value(s) in {rows.size} sample(s) ({shown}); an approved "
        "golden never stores them and the update was not written. Fix the model or engine (precision, inputs), "
        "or drop those samples from the golden dataset",
        output=name,
    )


def create_output(
    group: h5py.Group, name: str, samples: int, sample_shape: tuple[int, ...], dtype: Any
) -> h5py.Dataset:
    if not name:
        raise GoldenError("an output with an empty name cannot be stored in a golden; name the model's outputs")
    ds = create_array(group["outputs"], escape_name(name), (samples, *sample_shape), dtype, OUTPUT_FILTERS)
    ds.attrs["name"] = name
    return ds


def finish_snapshot(group: h5py.Group, *, generation: int, provenance: Provenance, baselines: Mapping[str, Any],
                    record_json: str | None) -> None:
    if record_json is not None:
        data = np.frombuffer(record_json.encode("utf-8"), dtype=np.uint8)
        create_array(group, "record", data.shape, np.uint8, {"compression": "gzip"},
                     data=data).attrs[integrity.DIGEST_ATTR] = integrity.array_digest(data)
    group.attrs["generation"] = generation
    group.attrs["provenance"] = _json_attr(provenance.to_dict())
    group.attrs["baselines"] = _json_attr(dict(baselines))


def append_approval(f: h5py.File, record: Mapping[str, Any]) -> None:
    text = _json_attr(dict(record))
    if "approvals" not in f:
        f.create_dataset("approvals", shape=(0,), maxshape=(None,), dtype=_STR, chunks=(64,), track_times=False)
    ds = f["approvals"]
    ds.resize((ds.shape[0] + 1,))
    ds[-1] = text
