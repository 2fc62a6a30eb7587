"""Work buffers reused from batch to batch.

A fresh 1 MiB temporary per batch costs a page fault per 4 KiB on first touch:
measured on a (256, 1000) float32 batch of logits, the classifier statistics
take 2.2 ms with fresh temporaries and 0.26 ms with these buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Workspace:
    """Named buffers, grown on demand and handed out as views of the asked shape."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A C-contiguous array of ``shape`` and ``dtype``, with undefined contents, valid until the next take of
        ``name``."""
        dt = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        buf = self._buffers.get(name)
        if buf is None or buf.dtype != dt or buf.size < size:
            buf = np.empty(max(size, 1), dt)
            self._buffers[name] = buf
        return buf[:size].reshape(shape)


def read_rows(source: Any, start: int, count: int, work: Workspace, name: str) -> np.ndarray:
    """Rows ``start .. start + count`` of ``source`` (an h5py dataset or an array) in a reused buffer."""
    if not hasattr(source, "read_direct"):
        return np.asarray(source[start : start + count])
    stop = min(start + count, int(source.shape[0]))
    out = work.take(name, (max(stop - start, 0), *source.shape[1:]), source.dtype)
    if out.size:
        source.read_direct(out, source_sel=np.s_[start:stop])
    return out
