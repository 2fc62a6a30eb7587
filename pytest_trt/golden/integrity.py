"""A golden file's bytes checked before the HDF5 library reads them, and its datasets' digests.

The HDF5 library can loop forever on some damaged files, so catching its exceptions is not enough:

* An approved update records the sha256 of the whole file in ``<config>.h5.sha256`` beside it
  (``sha256sum`` format, so ``sha256sum -c`` checks it too) and in its APPROVALS.jsonl line.  Every
  reader (:class:`~pytest_trt.golden.store.GoldenFile`: checks, ``golden show``, timing) and the
  refresh path (:func:`pytest_trt.golden.atomic.update`) hash the file, streamed, before h5py opens
  it; a mismatch fails at once, naming the file, both digests and the fix.  The hash starts on another core
  as soon as the test's golden is known (:func:`prefetch`), so a check mostly finds it made.  While an update replaces
  the file the sidecar names both the old and the new digest, so a kill at any moment leaves a file
  that matches it.
* A file without a sidecar (written before it existed) is opened first in a child process with a
  time limit (:func:`probe`): a file that makes the library hang fails with a message instead.
* Each stored array (inputs, labels, tags, outputs, record) carries a ``sha256`` attribute over its
  dtype, shape and bytes; the check hashes each slab as its own read brings it
  (:class:`DigestedArray`) and compares before any metric is judged, so an edited dataset is reported
  as an edited golden, never as an engine regression.  A file whose bytes match the ``file_sha256``
  its generation's APPROVALS.jsonl line records holds the approved arrays: its slabs are not hashed
  again (:func:`logged`); a digest file rewritten by hand does not earn that.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.common.fileio import prefetch_sha256, sha256_file, write_text_atomic
from pytest_trt.compare.render import update_command
from pytest_trt.errors import GoldenCorrupt

SIDECAR_SUFFIX = ".sha256"
#: the attribute of each stored array holding :func:`array_digest`
DIGEST_ATTR = "sha256"
#: seconds a child process may take to read a golden file without a sidecar, plus one per READ_RATE bytes
PROBE_TIMEOUT_S = 30.0
PROBE_RATE = 100 << 20
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
_PROBED: dict[tuple[str, int, int, int, int], bool] = {}


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def restore_hint(path: Path) -> str:
    return (f"Restore it from version control (git checkout -- {path} {sidecar_path(path).name}), or, if the "
            f"change is wanted, move it away and approve a refresh: {update_command()}")


def read_sidecar(path: Path) -> tuple[str, ...] | None:
    """The digests ``<file>.sha256`` accepts for ``path`` (None: no sidecar)."""
    side = sidecar_path(path)
    try:
        text = side.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenCorrupt(f"golden digest file {side} cannot be read ({exc}). {restore_hint(path)}",
                            path=str(path)) from None
    digests = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line.strip())
        if m is None or m.group(2) != path.name:
            raise GoldenCorrupt(f"golden digest file {side} line {lineno} is not '<sha256>  {path.name}' "
                                f"({line[:80]!r}). {restore_hint(path)}", path=str(path))
        digests.append(m.group(1))
    if not digests:
        raise GoldenCorrupt(f"golden digest file {side} is empty. {restore_hint(path)}", path=str(path))
    return tuple(digests)


def write_sidecar(path: Path, digests: Iterable[str]) -> None:
    """``<file>.sha256`` accepting ``digests`` (atomically)."""
    write_text_atomic(sidecar_path(path), "".join(f"{d}  {path.name}\n" for d in dict.fromkeys(digests)))


def prefetch(path: Path) -> bool:
    """Start hashing golden ``path`` on another core, when it has a digest file, so that :func:`check_file` finds
    the sha256 made (or waits for its end) instead of hashing in line: called as soon as the test's golden is known
    (its engine or ``trt_golden`` requested), it overlaps the engine's build or load and the rest of the setup.

    Nothing is trusted early: :func:`check_file` compares the digest with the digest file as before, and uses it
    only while the file keeps the identity (path, size, mtime, ctime, inode) it had while it was hashed.
    """
    try:
        if not sidecar_path(path).is_file():
            return False
    except OSError:
        return False
    return prefetch_sha256(path)


def check_file(path: Path, *, data: Path | None = None, timeout: float | None = None) -> str | None:
    """Raise :class:`GoldenCorrupt` unless ``path``'s bytes (or ``data``'s, a copy of them) may be given to h5py.

    With a sidecar: the streamed sha256 must be one it names (returned).  Without: :func:`probe`.
    """
    data = path if data is None else data
    try:
        st = os.stat(data)
    except OSError as exc:
        raise GoldenCorrupt(f"golden file {path} cannot be read ({exc.strerror}). {restore_hint(path)}",
                            path=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise GoldenCorrupt(f"golden file {path} is not a regular file. {restore_hint(path)}", path=str(path))
    expected = read_sidecar(path)
    if expected is None:
        probe(path, data=data, timeout=timeout)
        return None
    found = sha256_file(data, memo=True)
    if found not in expected:
        raise GoldenCorrupt(
            f"golden file {path} does not match its approved digest ({sidecar_path(path).name}: "
            f"{', '.join(expected)}; found {found}){_lfs_note(data)}: it was changed or damaged after its "
            f"approval, so it was not opened and was left untouched. {restore_hint(path)}",
            path=str(path), expected=list(expected), found=found,
        )
    return found


def _lfs_note(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return ""
    if head.startswith(b"version https://git-lfs"):
        return "; it is a Git LFS pointer, not the file (run git lfs pull)"
    return ""


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
    key = (os.path.abspath(data), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
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
            f"golden file {path} cannot be read ({reason}){_lfs_note(data)}; it is corrupt or truncated and was "
            f"left untouched. {restore_hint(path)}", path=str(path))
    if len(_PROBED) > 4096:
        _PROBED.clear()
    _PROBED[key] = True


# -- per-array digests ----------------------------------------------------------------------------------------

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


def array_digest(arr: Any) -> str:
    """The digest of a whole array or h5py dataset (read in slabs of about 16 MiB)."""
    shape = tuple(int(s) for s in arr.shape)
    if not shape:
        h = hashlib.sha256(_header(arr.dtype, shape))
        h.update(np.ascontiguousarray(arr[()]).tobytes())
        return h.hexdigest()
    d = StreamDigest(arr.dtype, shape)
    row = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(arr.dtype).itemsize
    step = max(1, (16 << 20) // max(1, row))
    for start in range(0, shape[0], step):
        d.update(start, np.asarray(arr[start : start + step]))
    return d.hexdigest()


def text_digest(values: Iterable[str]) -> str:
    """The digest of a string array (tags, approvals): the JSON list of its strings."""
    return hashlib.sha256(b"text\0" + json.dumps(list(values)).encode()).hexdigest()


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
