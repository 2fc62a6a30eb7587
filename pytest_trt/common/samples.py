"""The one digest of a sample set (named input arrays, optional labels and tags).

Golden datasets and calibration data are hashed alike: per input its name, dtype and shape as JSON,
then its bytes; then the labels as little-endian int64; then the tags as JSON.  The bytes are those of
every stored golden and calibration pin, so this spelling never changes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: bytes hashed per update: h5py datasets are read in slabs of samples, never loaded whole
_SLAB = 16 << 20


def samples_digest(inputs: Iterable[tuple[str, Any]], labels: Any | None, tags: Sequence[str] | None = None) -> str:
    """sha256 over ``(name, array)`` pairs in the order given, ``labels`` and ``tags`` (either may be None)."""
    h = hashlib.sha256()
    for name, arr in inputs:
        h.update(json.dumps([name, np.dtype(arr.dtype).str, list(arr.shape)]).encode())
        if not arr.shape:  # a 0-d array: no samples axis to slab
            h.update(np.ascontiguousarray(arr).tobytes())
            continue
        step = max(1, _SLAB // max(1, int(np.prod(arr.shape[1:], dtype=np.int64)) * arr.dtype.itemsize))
        for start in range(0, arr.shape[0], step):
            h.update(np.ascontiguousarray(arr[start : start + step]).tobytes())
    if labels is not None:
        h.update(b"labels\0" + np.ascontiguousarray(labels, dtype="<i8").tobytes())
    if tags is not None:
        h.update(b"tags\0" + json.dumps(list(tags)).encode())
    return h.hexdigest()
