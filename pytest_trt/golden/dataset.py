"""The golden dataset: named inputs with N samples, optional labels and tags.

A golden dataset is curated (representative samples, edge cases, past
misclassifications), so it is validated hard on construction: every input has
the same N, labels are N integers, tags are N strings.  Helpers build one from
arrays or from a folder of ``.npy`` / ``.npz`` files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_trt.common.samples import samples_digest
from pytest_trt.errors import GoldenError

LABELS_KEY = "labels"
TAGS_KEY = "tags"


def _check_name(name: str) -> str:
    # HDF5 paths use '/', and '.' alone would alias the group itself
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        raise GoldenError(f"golden dataset: input name {name!r} must be a non-empty string without '/'")
    return name


@dataclass(frozen=True, eq=False)
class GoldenDataset:
    """Inputs ``{name: (N, ...)}``, optional ``labels`` ``(N,)`` ints, optional ``tags`` (N strings).

    A tag string may hold several comma-separated tags (``"edge,past-error"``);
    ``""`` means none.
    """

    inputs: Mapping[str, np.ndarray]
    labels: np.ndarray | None = None
    tags: tuple[str, ...] | None = None
    _n: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.inputs:
            raise GoldenError("golden dataset: give at least one named input")
        arrays = {_check_name(k): np.asarray(v) for k, v in sorted(self.inputs.items())}
        sizes = {k: (v.shape[0] if v.ndim else None) for k, v in arrays.items()}
        if None in sizes.values() or len(set(sizes.values())) != 1:
            raise GoldenError(
                "golden dataset: every input needs the same number of samples on axis 0; got "
                + ", ".join(f"{k}: {v.shape}" for k, v in arrays.items())
            )
        n = next(iter(sizes.values()))
        if n == 0:
            raise GoldenError("golden dataset: inputs hold no samples")
        object.__setattr__(self, "inputs", arrays)
        object.__setattr__(self, "_n", int(n or 0))
        if self.labels is not None:
            labels = np.asarray(self.labels)
            if labels.ndim != 1 or labels.shape[0] != n:
                raise GoldenError(f"golden dataset: labels have shape {labels.shape}; expected ({n},), one per sample")
            if not np.issubdtype(labels.dtype, np.integer):
                raise GoldenError(f"golden dataset: labels must be integers (class indices), got dtype {labels.dtype}")
            object.__setattr__(self, "labels", labels.astype(np.int64))
        if self.tags is not None:
            tags = tuple(str(t) for t in self.tags)
            if len(tags) != n:
                raise GoldenError(f"golden dataset: {len(tags)} tags for {n} samples; give one tag string per sample")
            object.__setattr__(self, "tags", tags)

    @property
    def n(self) -> int:
        """Number of samples."""
        return self._n

    def digest(self) -> str:
        """sha256 over names, dtypes, shapes and bytes of inputs, labels and tags."""
        return samples_digest(self.inputs.items(), self.labels, self.tags)

    @classmethod
    def from_arrays(
        cls,
        inputs: Mapping[str, np.ndarray],
        labels: Sequence[int] | np.ndarray | None = None,
        tags: Sequence[str] | None = None,
    ) -> GoldenDataset:
        """Build a dataset from in-memory arrays (copies nothing it need not)."""
        return cls(dict(inputs), None if labels is None else np.asarray(labels), None if tags is None else tuple(tags))

    @classmethod
    def from_directory(cls, folder: str | Path) -> GoldenDataset:
        """Build a dataset from ``folder``.

        * ``<input>.npy``: all N samples of input ``<input>``;
        * ``*.npz``: batches, concatenated in file-name order; keys are input
          names, plus optional ``labels`` and ``tags``;
        * ``labels.npy``: N integer labels; ``tags.txt``: one tag string per line.
        """
        from pytest_trt.common.relpaths import describe_rule, resolve

        written, folder = folder, resolve(folder)
        if not folder.is_dir():
            raise GoldenError(
                f"golden dataset folder {str(written)!r} does not exist (looked for {folder.resolve()}; "
                f"{describe_rule()}). Create it with one <input name>.npy per model input "
                "(N samples on axis 0) and optionally labels.npy, or give an absolute path", path=str(Path(written)),
            )
        parts: dict[str, list[np.ndarray]] = {}
        for path in sorted(folder.glob("*.npz")):
            with np.load(path, allow_pickle=False) as npz:
                for key in npz.files:
                    parts.setdefault(key, []).append(npz[key])
        for path in sorted(folder.glob("*.npy")):
            parts.setdefault(path.stem, []).append(np.load(path, allow_pickle=False))
        joined = {k: np.concatenate(v, axis=0) if len(v) > 1 else v[0] for k, v in parts.items()}
        labels = joined.pop(LABELS_KEY, None)
        tag_arr = joined.pop(TAGS_KEY, None)
        tags: tuple[str, ...] | None = None if tag_arr is None else tuple(str(t) for t in tag_arr)
        tags_txt = folder / "tags.txt"
        if tags_txt.is_file():
            tags = tuple(tags_txt.read_text(encoding="utf-8").splitlines())
        if not joined:
            raise GoldenError(f"golden dataset folder {str(folder)!r} holds no .npy or .npz input arrays")
        return cls(joined, labels, tags)


#: the digest the store writes and checks (one spelling with calibration data's: common.samples)
dataset_digest = samples_digest
