"""A golden file's bytes checked before the HDF5 library reads them.

The HDF5 library can loop forever on some damaged files, so catching its exceptions is not enough.  Every reader
(:class:`~pytest_trt.golden.store.GoldenFile`: checks, ``golden show``, timing) and the refresh path
(:func:`pytest_trt.golden.atomic.update`) come here before h5py opens the file:

* A golden whose approval logged its blocks' digests is read through a
  :class:`~pytest_trt.golden.blocks.BlockVerifier` (:func:`open_checked`), which gives h5py checked blocks only.
* Any other golden with a digest file (:mod:`pytest_trt.golden.digest_file`) has its whole sha256 compared with
  the approved one, streamed, before h5py opens it (:func:`check_file`); a mismatch fails at once, naming the file,
  both digests and the fix.
* Either check starts on another core as soon as the test's golden is known (:func:`prefetch`), so a check mostly
  finds it made.
* A file without a digest file (written before it existed) is opened first in a child process with a time limit
  (:func:`pytest_trt.golden.probe.probe`): a file that makes the library hang fails with a message instead.

The arrays inside are checked within the check's read (:mod:`pytest_trt.golden.array_digests`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pytest_trt.common.filehash import FileKey, file_identity, known_sha256, prefetch_sha256, sha256_file
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden.blocks import BlockVerifier
from pytest_trt.golden.digest_file import mismatch_error, read_sidecar, restore_hint
from pytest_trt.golden.probe import probe

#: block verifiers started early (:func:`prefetch`), by the file's identity then
_VERIFIERS: dict[FileKey, BlockVerifier] = {}


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

