"""A golden file opened read-only (:class:`GoldenFile`), and h5py's errors on a damaged one as :class:`GoldenCorrupt`.

h5py is given only bytes checked against the approved digests (:func:`pytest_trt.golden.integrity.open_checked`).
The file's layout is :mod:`pytest_trt.golden.layout`; an update writes it with :mod:`pytest_trt.golden.writers`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from pytest_trt.compare.render import update_command
from pytest_trt.errors import GoldenCorrupt, GoldenError
from pytest_trt.golden import array_digests, integrity
from pytest_trt.golden.blocks import BlockVerifier
from pytest_trt.golden.dataset import GoldenDataset, dataset_digest
from pytest_trt.golden.layout import SnapshotView, snapshot_view, validate


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


class GoldenFile:
    """A golden file opened read-only: ``with GoldenFile(path) as g: g["config"].outputs["logits"]``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f: h5py.File | None = None
        #: the file's sha256 when its digest file named it (None: no digest file; the file was read in a child first)
        self.sha256: str | None = None
        self._verifier: BlockVerifier | None = None

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

    def label_rows(self) -> h5py.Dataset | None:
        """The labels dataset, read in slabs by whoever streams it (see :func:`max_label`)."""
        return self.h5["dataset/labels"] if "dataset/labels" in self.h5 else None

    def tag_rows(self) -> h5py.Dataset | None:
        """The tags dataset (bytes rows), read in slabs."""
        return self.h5["dataset/tags"] if "dataset/tags" in self.h5 else None

    def small_parts_edited(self, snapshot: SnapshotView) -> list[str]:
        """Labels, tags and the snapshot's record whose bytes differ from their stored digest (read in slabs)."""
        parts: list[tuple[str, Any, Any]] = []
        if "dataset/labels" in self.h5:
            ds = self.h5["dataset/labels"]
            parts.append(("labels", ds, lambda: array_digests.array_digest(ds, SLAB_ROWS * 8)))
        if "dataset/tags" in self.h5:
            tds = self.h5["dataset/tags"]
            parts.append(("tags", tds, lambda: array_digests.text_digest_rows(tds)))
        if "record" in snapshot.group:
            rec = snapshot.group["record"]
            parts.append((f"snapshot {snapshot.config!r} record", rec, lambda: array_digests.array_digest(rec)))
        edited = []
        for what, ds, digest in parts:
            stored = ds.attrs.get(array_digests.DIGEST_ATTR)
            if stored is not None and str(stored) != digest():
                edited.append(what)
        return edited

    def dataset_edited(self) -> bool:
        """For files without per-input digests: whether the stored samples differ from ``/dataset`` ``sha256``."""
        inputs = self.inputs()
        if all(array_digests.DIGEST_ATTR in ds.attrs for ds in inputs.values()):
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


#: rows of labels or tags read at a time where a whole column is scanned
SLAB_ROWS = 1 << 16


def max_label(labels: Any) -> int | None:
    """The largest label of a labels dataset (or array), read in slabs; None without labels."""
    if labels is None or not labels.shape[0]:
        return None
    n = int(labels.shape[0])
    return max(int(np.max(labels[i : i + SLAB_ROWS])) for i in range(0, n, SLAB_ROWS))
