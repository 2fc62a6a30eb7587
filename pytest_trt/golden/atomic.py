"""Atomic, serialized updates of one golden file.

HDF5 has no transactions: a writer killed mid-write leaves a file h5py may
refuse to open.  So an update never touches the real file.  Under a per-file
lock (``<file>.lock``; any number of xdist workers may try at once) it changes
a copy (:func:`pytest_trt.common.fileio.edited_copy`: copied, fsynced, ``os.replace``d
over the original).  What is left here is HDF5's: opening the copy, creating or
validating the layout before anything is written, the lock's error as a GoldenError,
and the file's digest: checked before the copy is opened (:mod:`pytest_trt.golden.integrity`),
recorded once it is complete (:mod:`pytest_trt.golden.digest_file`, its blocks' :mod:`pytest_trt.golden.blocks`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import h5py

from pytest_trt.common.filehash import sha256_file
from pytest_trt.common.fileio import LOCK_TIMEOUT_S, acquire_lock, edited_copy
from pytest_trt.errors import GoldenError, LockTimeout
from pytest_trt.golden import digest_file, integrity, layout, store, writers
from pytest_trt.golden.blocks import BLOCKS_FIELD, file_digests

#: seconds to sleep after the temp file is complete and before it replaces the
#: original; lets a test kill -9 the writer at the worst moment
PAUSE_ENV = "PYTEST_TRT_GOLDEN_PAUSE_BEFORE_REPLACE"


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


@contextmanager
def locked(path: Path, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the per-file lock of ``path`` (raises GoldenError naming the golden and its lock on timeout)."""
    try:
        held = acquire_lock(lock_path(path), what=f"golden file {path}", timeout=timeout)
    except LockTimeout as exc:
        raise GoldenError(exc.message, path=str(path), lock_file=str(exc.lock_file)) from None
    except OSError as exc:
        raise writers.folder_error(path.parent, exc) from None
    try:
        yield
    finally:
        held.release()


@contextmanager
def update(path: str | Path, *, timeout: float = LOCK_TIMEOUT_S,
           on_complete: Callable[[dict[str, Any]], None] | None = None) -> Iterator[h5py.File]:
    """Yield a writable copy of the golden file ``path``; on clean exit it replaces the original.

    A new file is created when ``path`` does not exist.  The copy's bytes are checked against the
    original's digest before h5py opens it.  Once the copy is complete, its sha256 goes to the
    sidecar (which accepts the old and the new file until the rename) and to ``on_complete`` (the
    approval log's line: when that raises, the sidecar is put back and nothing is replaced); then
    the copy replaces the original and the sidecar names the new digest only.  On any exception
    (or a kill) the original is left as it was, and matches its sidecar.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise writers.folder_error(path.parent, exc) from None
    with locked(path, timeout):
        before = digest_file.read_sidecar(path) if path.exists() else None
        digest: list[str] = []
        held: list[str] = []  # the digest of the file being replaced

        def finish(tmp: Path) -> None:
            whole, blocks = file_digests(tmp)  # one read: the file's sha256 and its blocks'
            digest.append(whole)
            try:
                digest_file.write_sidecar(path, (*held, digest[0]))
                if on_complete is not None:
                    on_complete({"file_sha256": whole, BLOCKS_FIELD: blocks})
            except BaseException:
                _restore_sidecar(path, before)
                raise
            _pause(tmp, path)

        with edited_copy(path, before_replace=finish) as tmp:
            exists = tmp.exists()
            if exists:
                held.append(integrity.check_file(path, data=tmp) or sha256_file(tmp))
            with store.guard(path):
                f = h5py.File(tmp, "r+" if exists else "w-")
            try:
                if not exists:
                    writers.init_file(f)
                else:
                    with store.guard(path):
                        layout.validate(f, path)  # before anything is written
                yield f
            finally:
                f.close()
        digest_file.write_sidecar(path, digest)


def _restore_sidecar(path: Path, before: tuple[str, ...] | None) -> None:
    if before is None:
        digest_file.sidecar_path(path).unlink(missing_ok=True)
    else:
        digest_file.write_sidecar(path, before)


def _pause(tmp: Path, path: Path) -> None:
    pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
    if pause > 0:
        print(f"pytest-trt: {tmp} complete, pausing {pause:g} s before replacing {path}", file=sys.stderr, flush=True)
        time.sleep(pause)
