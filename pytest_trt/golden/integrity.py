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
import io
import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.fileio import (
    FileKey,
    file_identity,
    known_sha256,
    prefetch_sha256,
    remember_sha256,
    sha256_file,
    write_text_atomic,
)
from pytest_trt.compare.render import update_command
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden.approvals import log_path

SIDECAR_SUFFIX = ".sha256"
#: the attribute of each stored array holding :func:`array_digest`
DIGEST_ATTR = "sha256"
#: seconds a child process may take to read a golden file without a sidecar, plus one per READ_RATE bytes
PROBE_TIMEOUT_S = 30.0
PROBE_RATE = 100 << 20
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")
_HEX = re.compile(r"^[0-9a-f]{64}$")
#: the APPROVALS.jsonl field with the sha256 of each BLOCK_BYTES block of the approved file
BLOCKS_FIELD = "file_blocks"
BLOCK_BYTES = 32 << 20
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
    """Start checking golden ``path`` on another core, when it has a digest file: called as soon as the test's
    golden is known (collection order, its engine or ``trt_golden`` requested), it overlaps the engine's build or
    load and the rest of the setup.  A golden whose approval logged its blocks' digests has its blocks checked
    (:class:`BlockVerifier`, which :func:`open_checked` hands to the reader); any other has its sha256 made, which
    :func:`check_file` waits for.

    Nothing is trusted early: each digest is compared with the approved one as before, and used only while the
    file keeps the identity (path, size, mtime, ctime, inode) it had while it was hashed.  Never raises.
    """
    try:
        expected = read_sidecar(path)
        if expected is None:
            return False
        key = file_identity(path, os.stat(path))
        if known_sha256(key) is not None:
            return True
        verifier = _VERIFIERS.get(key)
        if verifier is not None and verifier.usable:
            return True
        verifier = BlockVerifier.of(path, key, expected)
    except (OSError, GoldenCorrupt):
        return False
    if verifier is None:
        return prefetch_sha256(path)
    if len(_VERIFIERS) > 16:  # prefetched and never opened: let them go (their threads end)
        for old in list(_VERIFIERS.values()):
            old.close()
        _VERIFIERS.clear()
    _VERIFIERS[key] = verifier
    return verifier.start()


def open_checked(path: Path) -> tuple[str | None, BlockVerifier | None]:
    """(the sha256 the digest file approved, or None without one; the verifier h5py must read through, or None).

    With a verifier, h5py reads the file through :meth:`BlockVerifier.reader`, which gives it only blocks checked
    against the digests the approval logged (the digest file's sha256 selects that approval line); the returned
    sha256 holds once :meth:`BlockVerifier.finish` has returned.  Without one (goldens approved before blocks were
    logged, a file already hashed whole, the file's size not the approved one): :func:`check_file`, before h5py
    opens the file.
    """
    st = _regular(path, path)
    expected = read_sidecar(path)
    if expected is None:
        return check_file(path), None
    key = file_identity(path, st)
    verifier = _VERIFIERS.pop(key, None)  # started early: h5py reads through the descriptor it checks
    if verifier is not None and verifier.usable and verifier.whole in expected:
        return verifier.whole, verifier
    if verifier is not None:
        verifier.close()
    known = known_sha256(key)
    if known is not None and known in expected:
        return known, None
    try:
        verifier = BlockVerifier.of(path, key, expected)
    except OSError:  # replaced or unreadable since the stat: the whole file is checked (and its error reported)
        verifier = None
    if verifier is None:
        return check_file(path), None
    verifier.start()
    return verifier.whole, verifier


def _regular(path: Path, data: Path) -> os.stat_result:
    try:
        st = os.stat(data)
    except OSError as exc:
        raise GoldenCorrupt(f"golden file {path} cannot be read ({exc.strerror}). {restore_hint(path)}",
                            path=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise GoldenCorrupt(f"golden file {path} is not a regular file. {restore_hint(path)}", path=str(path))
    return st


def check_file(path: Path, *, data: Path | None = None, timeout: float | None = None) -> str | None:
    """Raise :class:`GoldenCorrupt` unless ``path``'s bytes (or ``data``'s, a copy of them) may be given to h5py.

    With a sidecar: the streamed sha256 must be one it names (returned).  Without: :func:`probe`.
    """
    data = path if data is None else data
    _regular(path, data)
    expected = read_sidecar(path)
    if expected is None:
        probe(path, data=data, timeout=timeout)
        return None
    found = sha256_file(data, memo=True)
    if found not in expected:
        raise mismatch_error(path, expected, found, data)
    return found


def mismatch_error(path: Path, expected: Iterable[str], found: str, data: Path | None = None,
                   where: str = "") -> GoldenCorrupt:
    expected = list(expected)
    return GoldenCorrupt(
        f"golden file {path} does not match its approved digest ({sidecar_path(path).name}: "
        f"{', '.join(expected)}; found {found}{where}){_lfs_note(data or path)}: it was changed or damaged after its "
        f"approval, so {'h5py was given none of the changed bytes' if where else 'it was not opened'} and it was "
        f"left untouched. {restore_hint(path)}",
        path=str(path), expected=expected, found=found,
    )


def file_digests(path: Path) -> tuple[str, dict[str, Any]]:
    """One read of ``path``: its sha256 and the :data:`BLOCKS_FIELD` record (size, block size, each block's sha256)
    that an approval logs, so that a check can give h5py each block as soon as it is checked."""
    whole = hashlib.sha256()
    blocks: list[str] = []
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK_BYTES):
            whole.update(block)
            blocks.append(hashlib.sha256(block).hexdigest())
            size += len(block)
    return whole.hexdigest(), {"size": size, "block": BLOCK_BYTES, "sha256": blocks}


#: block verifiers started early (:func:`prefetch`), by the file's identity then
_VERIFIERS: dict[FileKey, BlockVerifier] = {}
_TODO, _BUSY, _OK, _BAD = 0, 1, 2, 3


class BlockVerifier:
    """A golden's blocks checked against the digests its approval logged: on another core, in file order, from
    when the golden is known; a reader waits only for the blocks it reads (checking a block itself when no one
    has started it).  h5py reads through :meth:`reader`, which serves bytes of checked blocks only, from the file
    descriptor the blocks were checked on; a block that does not match fails the read, and :meth:`finish`, naming
    the file and the block.  Once every block matched, the file's approved sha256 is remembered for its identity.
    """

    def __init__(self, path: Path, key: FileKey, whole: str, expected: tuple[str, ...], block: int,
                 digests: list[str]) -> None:
        self.path, self.key, self.whole, self.expected = path, key, whole, expected
        self.size, self.block, self.digests = key[1], block, digests
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        if file_identity(path, os.fstat(self._fd)) != key:  # replaced between the stat and the open
            os.close(self._fd)
            raise OSError(f"{path} changed while it was opened")
        self._state = bytearray(len(digests))
        self._cond = threading.Condition()
        self._pid = os.getpid()
        self._closed = False
        self._thread: Future[None] | None = None
        #: the first block that did not match: (message, context) of the GoldenCorrupt that :meth:`error` makes
        self.failure: tuple[str, dict[str, Any]] | None = None

    @classmethod
    def of(cls, path: Path, key: FileKey, expected: tuple[str, ...]) -> BlockVerifier | None:
        """The verifier of ``path`` (identity ``key``) from the last APPROVALS.jsonl line of this file that names
        one of the ``expected`` digests and logged blocks for its size; None when there is none."""
        try:
            raw = log_path(path.parent).read_bytes()
        except OSError:
            return None
        found: tuple[str, int, list[str]] | None = None
        for line in raw.split(b"\n"):
            if BLOCKS_FIELD.encode() not in line or path.name.encode() not in line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            blocks = rec.get(BLOCKS_FIELD)
            if rec.get("file") != path.name or rec.get("file_sha256") not in expected or not isinstance(blocks, dict):
                continue
            size, block, digests = blocks.get("size"), blocks.get("block"), blocks.get("sha256")
            if (isinstance(block, int) and block > 0 and size == key[1] and isinstance(digests, list)
                    and len(digests) == -(-key[1] // block) and all(isinstance(d, str) and _HEX.match(d)
                                                                     for d in digests)):
                found = (str(rec["file_sha256"]), block, [str(d) for d in digests])
        if found is None or not found[2]:
            return None
        return cls(path, key, found[0], expected, found[1], found[2])

    @property
    def usable(self) -> bool:
        """False in a forked child (the parent's thread may hold blocks there) or once closed."""
        return not self._closed and os.getpid() == self._pid

    def start(self) -> bool:
        """Start checking the blocks in order on another core (once)."""
        if self._thread is None:
            self._thread = Future()
            try:
                on_thread("golden-blocks", (self._thread, self._run))
            except Exception:  # noqa: BLE001 - the reader checks each block itself
                self._thread = None
                return False
        return True

    def _run(self) -> None:
        buffer = bytearray(min(self.block, self.size))  # one buffer for every block: no 32 MiB allocation each
        for i in range(len(self.digests)):
            if self._closed or self.failure is not None:
                return
            if self._claim(i):
                self._check(i, buffer)

    def _claim(self, i: int) -> bool:
        with self._cond:
            if self._state[i] != _TODO:
                return False
            self._state[i] = _BUSY
            return True

    def _check(self, i: int, buffer: bytearray | None = None) -> None:
        length = min(self.block, self.size - i * self.block)
        try:
            buffer = bytearray(length) if buffer is None or len(buffer) < length else buffer
            with memoryview(buffer)[:length] as view:
                got = os.preadv(self._fd, [view], i * self.block)
                found = hashlib.sha256(view[:got]).hexdigest()
            ok = found == self.digests[i]
        except OSError as exc:
            ok, found = False, f"unreadable ({exc.strerror})"
        with self._cond:
            self._state[i] = _OK if ok else _BAD
            if not ok and self.failure is None:
                error = mismatch_error(
                    self.path, self.expected, found,
                    where=f" for bytes {i * self.block}-{min(self.size, (i + 1) * self.block)}, whose approved "
                          f"sha256 is {self.digests[i]}")
                self.failure = (error.message, dict(error.context))
            if ok and all(s == _OK for s in self._state):
                remember_sha256(self.key, self.whole)
            self._cond.notify_all()

    def ensure(self, start: int, stop: int) -> None:
        """Return once bytes ``start:stop`` are checked; raise the mismatch when a block (any) failed."""
        for i in range(start // self.block, min(len(self.digests), -(-stop // self.block))):
            while True:
                with self._cond:
                    if self.failure is not None:
                        raise self.error()
                    state = self._state[i]
                    if state == _OK:
                        break
                    if state == _BUSY:
                        self._cond.wait()
                        continue
                    self._state[i] = _BUSY
                self._check(i)

    def error(self) -> GoldenCorrupt:
        """A new exception for the mismatch (one raised through h5py keeps frames that saw h5py's buffers)."""
        message, context = self.failure or (f"golden file {self.path} could not be checked", {})
        return GoldenCorrupt(message, **context)

    def finish(self) -> None:
        """Check every block not checked yet (the file's bytes all match the approved ones, or this raises)."""
        self.ensure(0, self.size)

    def close(self) -> None:
        """Stop the thread (after the block it is on) and close the file."""
        self._closed = True
        if self._thread is not None and self._pid == os.getpid():
            self._thread.result()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def reader(self) -> io.RawIOBase:
        """A read-only file object for h5py that serves checked bytes only."""
        return _CheckedReader(self)

    def pread_into(self, view: memoryview, offset: int) -> int:
        n = max(0, min(len(view), self.size - offset))
        if n == 0:
            return 0
        self.ensure(offset, offset + n)
        with view[:n] as part:
            return os.preadv(self._fd, [part], offset)


class _CheckedReader(io.RawIOBase):
    def __init__(self, verifier: BlockVerifier) -> None:
        super().__init__()
        self._v = verifier
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._v.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        # h5py frees its buffer after the call: no view of it, and no frame holding it, may outlive the call (an
        # exception raised through h5py keeps its frames, and freeing them after the library is gone crashes)
        try:
            with memoryview(buffer) as whole, whole.cast("B") as view:
                n = self._v.pread_into(view, self._pos)
        except (GoldenCorrupt, OSError):
            n = -1
        if n < 0:
            del buffer
            raise self._v.error()
        self._pos += n
        return n


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
