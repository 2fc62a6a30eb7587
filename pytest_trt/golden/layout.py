"""The golden HDF5 file's layout: its names, format and schema, and the view of one snapshot group.

One file per model, ``<golden_dir>/<config.name>.h5``::

    /                      attrs format, schema
    /dataset               attrs samples, sha256
    /dataset/inputs/<name> (N, ...)          no filter (see writers.INPUT_FILTERS)
    /dataset/labels        (N,) int64        optional
    /dataset/tags          (N,) utf-8        optional, "" = no tag, commas separate several
    /snapshots/<config>    attrs generation, provenance (JSON), baselines (JSON), noise (JSON, optional)
        outputs/<escaped>  (N, ...)          no filter (see writers.OUTPUT_FILTERS); attr name: the output's name
        record             uint8 JSON bytes  the normalized BuildRecord
    /history/<config>/gen-<NNNN>             earlier snapshots, moved here unchanged
    /approvals             (K,) utf-8 JSON   one approval record per refresh

Every input, labels, tags, output and record dataset has a ``sha256`` attribute
(:func:`pytest_trt.golden.array_digests.array_digest`, ``text_digest`` for tags), checked on every
read of a check.  An output's link name is its name with ``%``, ``/`` and a leading ``.`` escaped
(``%25``, ``%2F``, ``%2E``): names such as ``out/y`` (tf2onnx) stay one dataset.  Files written
before that stored ``out/y`` as group ``out`` and dataset ``y``; readers take both.  The whole
file's sha256 is in ``<config>.h5.sha256`` beside it (:mod:`pytest_trt.golden.digest_file`).
The file is read through :class:`pytest_trt.golden.store.GoldenFile` and written by
:mod:`pytest_trt.golden.writers`; the pytest hook module never imports them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from pytest_trt.errors import GoldenError
from pytest_trt.golden.provenance import Provenance

FORMAT = "pytest-trt-golden"
SCHEMA = 1


@dataclass(frozen=True)
class SnapshotView:
    """One snapshot inside an open file: outputs stay on disk until sliced."""

    config: str
    generation: int
    provenance: Provenance
    baselines: dict[str, Any]
    outputs: Mapping[str, h5py.Dataset]
    group: h5py.Group

    @property
    def noise(self) -> dict[str, Any] | None:
        """The noise measured at approval (:mod:`pytest_trt.golden.noise`; ``measured`` false: why not), or None."""
        return _object_attr(self.config, self.group, "noise") if "noise" in self.group.attrs else None

    def record_json(self) -> str | None:
        return bytes(self.group["record"][()]).decode("utf-8") if "record" in self.group else None


def snapshot_view(config: str, group: h5py.Group) -> SnapshotView:
    """A :class:`SnapshotView` of a snapshot group (current or history).

    Raises ValueError naming the snapshot and attribute when an attribute has the wrong
    type (callers run it under :func:`pytest_trt.golden.store.guard`, which names the file).
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
