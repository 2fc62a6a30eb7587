"""Each stored array's digest: the ``sha256`` attribute over its dtype, shape and bytes, checked within a check's read.

Every input, labels, tags, output and record dataset of a golden carries it.  The check hashes each slab as its
own read brings it (:class:`DigestedArray`) and compares before any metric is judged, so an edited dataset is
reported as an edited golden, never as an engine regression.  A file whose bytes match the ``file_sha256`` its
generation's APPROVALS.jsonl line records holds the approved arrays: its slabs are not hashed again
(:func:`logged`); a digest file rewritten by hand does not earn that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden.digest_file import restore_hint

#: the attribute of each stored array holding :func:`array_digest`
DIGEST_ATTR = "sha256"


def _header(dtype: Any, shape: tuple[int, ...]) -> bytes:
    return json.dumps([np.dtype(dtype).str, [int(s) for s in shape]]).encode()


class StreamDigest:
    """sha256 of one array's dtype, shape and bytes, fed with consecutive slabs of samples."""

    def __init__(self, dtype: Any, shape: tuple[int, ...]) -> None:
        self._h = hashlib.sha256(_header(dtype, shape))
        self.rows = int(shape[0]) if shape else 0
        self.next = 0
        self.broken = False

    def update(self, start: int, rows: np.ndarray) -> None:
        if self.broken or start != self.next:
            self.broken = self.broken or start > self.next  # a reread of earlier rows is harmless; a gap is not
            return
        self._h.update(np.ascontiguousarray(rows).data)
        self.next = start + int(rows.shape[0])

    @property
    def complete(self) -> bool:
        return not self.broken and self.next == self.rows

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def array_digest(arr: Any, slab_bytes: int = 16 << 20) -> str:
    """The digest of a whole array or h5py dataset (read in slabs of about ``slab_bytes``)."""
    shape = tuple(int(s) for s in arr.shape)
    if not shape:
        h = hashlib.sha256(_header(arr.dtype, shape))
        h.update(np.ascontiguousarray(arr[()]).tobytes())
        return h.hexdigest()
    d = StreamDigest(arr.dtype, shape)
    row = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(arr.dtype).itemsize
    step = max(1, slab_bytes // max(1, row))
    for start in range(0, shape[0], step):
        d.update(start, np.asarray(arr[start : start + step]))
    return d.hexdigest()


def text_digest(values: Iterable[str]) -> str:
    """The digest of a string array (tags, approvals): the JSON list of its strings."""
    return hashlib.sha256(b"text\0" + json.dumps(list(values)).encode()).hexdigest()


def text_digest_rows(rows: Any, slab: int = 1 << 14) -> str:
    """:func:`text_digest` of a string dataset (bytes or str rows), read ``slab`` rows at a time.

    ``json.dumps`` of a list is ``[`` + its items' JSON joined by ``", "`` + ``]``, so each slab's
    list, brackets dropped, is joined the same way.
    """
    h = hashlib.sha256(b"text\0[")
    first = True
    for start in range(0, int(rows.shape[0]), slab):
        texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in rows[start : start + slab]]
        if texts:
            h.update((b"" if first else b", ") + json.dumps(texts).encode()[1:-1])
            first = False
    h.update(b"]")
    return h.hexdigest()


class DigestedArray:
    """An h5py dataset whose slabs are hashed as the check reads them (``[a:b]`` and ``read_direct``)."""

    def __init__(self, dataset: Any, what: str, *, verify: bool = True) -> None:
        self.dataset = dataset
        self.what = what
        stored = dataset.attrs.get(DIGEST_ATTR) if verify else None
        self.expected: str | None = None if stored is None else str(stored)
        self.digest = StreamDigest(dataset.dtype, tuple(dataset.shape))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.dataset.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        dtype: np.dtype[Any] = np.dtype(self.dataset.dtype)
        return dtype

    def __len__(self) -> int:
        return int(self.dataset.shape[0])

    def __getitem__(self, key: Any) -> Any:
        out = self.dataset[key]
        if self.expected is not None and isinstance(key, slice) and key.step in (None, 1) and self.dataset.shape:
            start = 0 if key.start is None else int(key.start)
            self.digest.update(start, np.asarray(out))
        return out

    def read_direct(self, out: np.ndarray, source_sel: Any = None) -> None:
        self.dataset.read_direct(out, source_sel=source_sel)
        key = source_sel if isinstance(source_sel, slice) and self.expected is not None else None
        if key is not None and key.step in (None, 1):
            self.digest.update(0 if key.start is None else int(key.start), out)

    def mismatch(self) -> str | None:
        """None when the bytes read (or, when the check skipped rows, the whole dataset) match the stored digest."""
        if self.expected is None:
            return None
        found = self.digest.hexdigest() if self.digest.complete else array_digest(self.dataset)
        if found == self.expected:
            return None
        return f"{self.what} (sha256 {self.expected[:16]}... stored, {found[:16]}... found)"


def logged(records: Iterable[dict[str, Any]], path: Path, config: str, generation: int, sha256: str | None) -> bool:
    """Whether an approval record of ``config`` ``generation`` in ``path`` names ``sha256`` as the file's digest."""
    return sha256 is not None and any(
        r.get("file") == path.name and r.get("config") == config and r.get("generation") == generation
        and r.get("file_sha256") == sha256 for r in records)


def edited_error(path: Path, parts: list[str]) -> GoldenCorrupt:
    """An edited golden: ``parts`` name what differs from its digest or approval."""
    return GoldenCorrupt(
        f"golden file {path} was edited after its approval: {'; '.join(parts)}. Its outputs were not judged "
        f"(this is not an engine regression). {restore_hint(path)}", path=str(path), edited=parts,
    )
