"""A golden file without a digest file read first in a child process with a time limit.

The HDF5 library can loop forever on some damaged files, so catching its exceptions is not enough: a file that
makes the library hang (or fail) in the child fails the check with a message instead of hanging the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pytest_trt.common.filehash import file_identity
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden.digest_file import lfs_note, restore_hint, sidecar_path

#: seconds a child process may take to read a golden file without a sidecar, plus one per PROBE_RATE bytes
PROBE_TIMEOUT_S = 30.0
PROBE_RATE = 100 << 20
_PROBED: dict[tuple[str, int, int, int, int], bool] = {}

_PROBE_CODE = """
import sys, h5py
def visit(name, obj):
    dict(obj.attrs)
    if isinstance(obj, h5py.Dataset) and obj.shape:
        step = max(1, (16 << 20) // max(1, obj.dtype.itemsize * max(1, obj.size // max(1, obj.shape[0]))))
        for start in range(0, obj.shape[0], step):
            obj[start:start + step]
    elif isinstance(obj, h5py.Dataset):
        obj[()]
with h5py.File(sys.argv[1], "r") as f:
    dict(f.attrs)
    f.visititems(visit)
"""


def probe(path: Path, *, data: Path | None = None, timeout: float | None = None) -> None:
    """Read every object of ``data`` (default ``path``) in a child process; raise when it fails or hangs.

    For golden files without a sidecar.  A file that passed is not read again while its
    path, size, times and inode stay the same.
    """
    data = path if data is None else data
    st = os.stat(data)
    key = file_identity(data, st)
    if _PROBED.get(key):
        return
    limit = timeout if timeout is not None else PROBE_TIMEOUT_S + st.st_size / PROBE_RATE
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE_CODE, str(data)], capture_output=True, text=True,
                              timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        raise GoldenCorrupt(
            f"golden file {path} has no digest file ({sidecar_path(path).name}) and the HDF5 library did not "
            f"finish reading it within {limit:g} s in a child process: it is damaged. {restore_hint(path)}",
            path=str(path)) from None
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise GoldenCorrupt(
            f"golden file {path} cannot be read ({reason}){lfs_note(data)}; it is corrupt or truncated and was "
            f"left untouched. {restore_hint(path)}", path=str(path))
    if len(_PROBED) > 4096:
        _PROBED.clear()
    _PROBED[key] = True
