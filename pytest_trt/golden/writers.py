"""The writers of a golden file, called on the temporary copy inside :func:`pytest_trt.golden.atomic.update`.

Compressed datasets are chunked (whole samples, about 1 MiB a chunk), unfiltered
ones contiguous; every dataset is created with ``track_times=False`` and every
attribute is written in a fixed order, so identical content gives identical
bytes.  The layout they write is :mod:`pytest_trt.golden.layout`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from pytest_trt.errors import FolderUnusable, GoldenError
from pytest_trt.golden.array_digests import DIGEST_ATTR, array_digest, text_digest
from pytest_trt.golden.dataset import GoldenDataset, dataset_digest
from pytest_trt.golden.layout import FORMAT, SCHEMA, escape_name
from pytest_trt.golden.provenance import Provenance

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
        create_array(inputs, name, arr.shape, arr.dtype, INPUT_FILTERS, data=arr).attrs[DIGEST_ATTR] = array_digest(arr)
    if dataset.labels is not None:
        labels = dataset.labels.astype(np.int64)
        create_array(group, "labels", labels.shape, np.int64, LABEL_FILTERS,
                     data=labels).attrs[DIGEST_ATTR] = array_digest(labels)
    if dataset.tags is not None:
        create_array(group, "tags", (dataset.n,), _STR, {"compression": "gzip"},
                     data=np.array(dataset.tags, dtype=object)).attrs[DIGEST_ATTR] = text_digest(dataset.tags)
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
                    record_json: str | None, noise: Mapping[str, Any] | None = None) -> None:
    if record_json is not None:
        data = np.frombuffer(record_json.encode("utf-8"), dtype=np.uint8)
        create_array(group, "record", data.shape, np.uint8, {"compression": "gzip"},
                     data=data).attrs[DIGEST_ATTR] = array_digest(data)
    group.attrs["generation"] = generation
    group.attrs["provenance"] = _json_attr(provenance.to_dict())
    group.attrs["baselines"] = _json_attr(dict(baselines))
    if noise is not None:  # pytest_trt.golden.noise: measured at approval, or why not
        group.attrs["noise"] = _json_attr(dict(noise))


def append_approval(f: h5py.File, record: Mapping[str, Any]) -> None:
    text = _json_attr(dict(record))
    if "approvals" not in f:
        f.create_dataset("approvals", shape=(0,), maxshape=(None,), dtype=_STR, chunks=(64,), track_times=False)
    ds = f["approvals"]
    ds.resize((ds.shape[0] + 1,))
    ds[-1] = text
