"""Content-addressed engine cache.

Key (:func:`pytest_trt.backends.request.cache_key`, made once per build request)
= sha256 over the ONNX bytes' hash, the canonical config, backend name and
versions, device identity and the artifact/record schema versions.  An entry
is a folder ``<dir>/<key[:2]>/<key>/`` with the artifact files and
``entry.json`` listing each file's sha256.  Entries are written into a
temporary folder and renamed into place, so a reader sees a whole entry or
none; a file lock per key makes concurrent pytest-xdist workers build a key
once; an entry failing its hash check is moved aside and rebuilt, never used.
No fsync: after a power loss a torn entry fails its hash check and is rebuilt,
so durability would cost every build (~15 ms here) for nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

from pytest_trt.artifact import ENGINE_FILE, BuildResult
from pytest_trt.backends.request import CACHE_SCHEMA
from pytest_trt.common.fileio import (
    LOCK_TIMEOUT_S,
    HeldLock,
    acquire_lock,
    pid_alive,
    replace_directory,
    write_bytes_atomic,
)
from pytest_trt.errors import CacheCorrupt, FolderUnusable

ENTRY_FILE = "entry.json"
#: where a rebuild's replaced entry is kept (``<cache>/replaced/<key>``), for the rebuild check
REPLACED = "replaced"
#: corrupt entries kept for inspection (newest first); older ones are deleted
KEEP_CORRUPT = 5


class EngineCache:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def check_folder(self) -> None:
        """Raise FolderUnusable when the cache root exists but is not a folder."""
        if self.root.exists() and not self.root.is_dir():
            raise FolderUnusable(
                f"engine cache {self.root} is a file, not a folder: remove or rename it, or point "
                "--trt-cache-dir / trt_cache_dir at a folder",
                path=self.root,
            )

    def acquire(self, key: str, timeout: float = LOCK_TIMEOUT_S) -> HeldLock:
        """Take the exclusive per-key lock across processes (pytest-xdist workers); return it held.

        Not thread-local: the thread that writes the entry releases it.  Only writers lock:
        entries appear by rename, so reading needs no lock (a read-only cache serves hits).
        Raises LockTimeout naming the key and its lock file when another process holds it too long.
        """
        self.check_folder()
        lock_file = self.root / "locks" / f"{key}.lock"
        try:
            lock = acquire_lock(lock_file, what=f"engine cache key {key[:12]} in {self.root}", timeout=timeout)
        except OSError as exc:
            raise FolderUnusable(
                f"engine cache {self.root} is not writable ({exc.strerror}: {exc.filename}): building an "
                "engine needs a writable cache; point --trt-cache-dir / trt_cache_dir at a writable "
                "folder, or run without --trt-engine-build/--trt-rebuild to use its engines read-only",
                path=self.root,
            ) from None
        self.clean_stale()
        return lock

    def reserve(self, key: str, *, reread: bool) -> tuple[HeldLock, BuildResult | None, str | None]:
        """Take ``key``'s lock, then (``reread``) look the entry up again: another worker may have built it meanwhile.

        Returns the held lock, the entry found (or None) and, for a corrupt entry moved aside, what happened.
        """
        lock = self.acquire(key)
        if not reread:
            return lock, None, None
        try:
            return lock, self.load(key), None
        except CacheCorrupt as exc:
            return lock, None, f"{exc.message} (moved to {self.discard(key)})"
        except BaseException:
            lock.release()
            raise

    def load(self, key: str) -> BuildResult | None:
        """The cached result for ``key``; None on a miss. Raises CacheCorrupt on a bad entry."""
        folder = self.entry_dir(key)
        entry_path = folder / ENTRY_FILE
        try:
            if not folder.exists():
                return None
        except PermissionError as exc:
            raise self._unreadable(folder, exc) from None
        try:
            entry = json.loads(entry_path.read_text(encoding="utf-8"))
            if entry.get("key") != key:
                raise ValueError("entry.json names another key")
            files = dict(entry["files"])
            if ENGINE_FILE not in files:
                raise KeyError(ENGINE_FILE)
            # every file read once and checked from memory; the engine (14.7 MB for a MobileNetV2) hashed
            # once, on a thread while the log is rebuilt, and the digest kept with the result
            result = BuildResult.read(folder, digests=files)
            clock = entry.get("clock")
            if isinstance(clock, dict) and all(isinstance(clock.get(k), str) for k in ("started", "finished")):
                result.set_clock(clock["started"], clock["finished"])
            return result
        except PermissionError as exc:
            raise self._unreadable(folder, exc) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CacheCorrupt(
                f"engine cache entry {folder} is corrupt ({exc}); it will be rebuilt", path=folder
            ) from None

    def _unreadable(self, folder: Path, exc: PermissionError) -> FolderUnusable:
        """A shared cache written under a private umask (077): its entries exist but this user cannot read them."""
        return FolderUnusable(
            f"engine cache entry {folder} is not readable by this user ({exc.strerror}: {exc.filename}); the cache "
            f"was written by another user with a private umask: make it readable with 'chmod -R a+rX {self.root}' "
            "(and build it under 'umask 022'), or point --trt-cache-dir / trt_cache_dir at a cache of your own",
            path=self.root,
        )

    def discard(self, key: str) -> Path | None:
        """Move a corrupt entry aside so it is never used again; return where it went.

        Only the newest KEEP_CORRUPT corrupt entries are kept for inspection.
        """
        folder = self.entry_dir(key)
        if not folder.exists():
            return None
        target = self.root / "corrupt" / f"{key}-{int(time.time())}-{uuid.uuid4().hex[:6]}"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(folder, target)
        except OSError as exc:
            raise FolderUnusable(
                f"engine cache entry {folder} is corrupt and cannot be moved aside ({exc.strerror}); "
                "the cache is read-only: rebuild it where it is writable",
                path=folder,
            ) from None
        self._prune_corrupt()
        return target

    def _prune_corrupt(self) -> None:
        folder = self.root / "corrupt"
        entries = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
        for old in entries[KEEP_CORRUPT:]:
            shutil.rmtree(old, ignore_errors=True)

    def clean_stale(self) -> list[Path]:
        """Delete ``tmp/.<key>.<pid>.<rand>`` folders whose writer process no longer exists; return them.

        A writer killed mid-store leaves its folder behind; the pid in the name tells whether it
        is still writing.  (Run under a per-key lock, by a process on the same host as the writers.)
        """
        removed: list[Path] = []
        tmp = self.root / "tmp"
        if not tmp.is_dir():
            return removed
        for folder in tmp.iterdir():
            parts = folder.name.split(".")
            pid = parts[-2] if len(parts) >= 3 else ""
            if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        return removed

    def store(self, key: str, result: BuildResult) -> Path:
        """Write ``result`` under ``key`` atomically (replacing an entry ``--trt-rebuild`` rebuilt); return it."""
        final = self.entry_dir(key)

        def fill(folder: Path) -> None:
            files = result.write(folder)
            entry = {"key": key, "schema": CACHE_SCHEMA, "created": time.time(), "files": files}
            clock = result.clock()
            if clock is not None:  # beside "files": the entry's identity (its file hashes) does not change
                entry["clock"] = clock
            # inside the unpublished folder: a plain write (the rename publishes it; no fsync, see above)
            (folder / ENTRY_FILE).write_text(json.dumps(entry, indent=2, sort_keys=True) + "\n", encoding="utf-8")

        replace_directory(final, fill, staging=self.root / "tmp", keep_replaced_in=self.root / REPLACED)
        return final

    def replaced_dir(self, key: str) -> Path:
        """Where :meth:`store` keeps the entry a rebuild replaced (``<dir>/replaced/<key>``), for the rebuild check."""
        return self.root / REPLACED / key

    def replaced_engine_sha256(self, key: str) -> str | None:
        """The engine sha256 that the replaced entry's ``entry.json`` lists; None: no replaced entry, or unreadable."""
        try:
            entry = json.loads((self.replaced_dir(key) / ENTRY_FILE).read_text(encoding="utf-8"))
            return str(entry["files"][ENGINE_FILE])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def load_replaced(self, key: str) -> BuildResult:
        """The replaced entry's result, its files checked against its ``entry.json``."""
        folder = self.replaced_dir(key)
        entry = json.loads((folder / ENTRY_FILE).read_text(encoding="utf-8"))
        return BuildResult.read(folder, digests=dict(entry["files"]))

    def drop_replaced(self, key: str) -> None:
        """Delete the replaced entry once it was compared."""
        shutil.rmtree(self.replaced_dir(key), ignore_errors=True)

    def restore_replaced(self, key: str) -> Path:
        """Put the replaced entry back in place of the rebuilt one, under the key's lock; return the entry folder."""
        final = self.entry_dir(key)
        lock = self.acquire(key)
        try:
            doomed = self.root / "tmp" / f".{key}.rejected.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            doomed.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():
                os.replace(final, doomed)
            os.replace(self.replaced_dir(key), final)
            shutil.rmtree(doomed, ignore_errors=True)
        finally:
            lock.release()
        return final

    def write_entry(self, key: str, result: BuildResult, lock: HeldLock, errors: list[str]) -> None:
        """The writer thread's work: store ``result``, then release the key's lock; a failure is added to ``errors``."""
        try:
            self.store(key, result)
        except BaseException as exc:  # reported by the provider's flush(); the engine in memory is still valid
            errors.append(f"engine cache entry {self.entry_dir(key)} was not written: {exc}")
        finally:
            lock.release()

    def save_failure(self, name: str, key: str, log_text: str) -> Path:
        """Keep the log of a failed build (evidence is never lost); return the log path."""
        path = self.root / "failed" / f"{name}-{key[:12]}" / "build.log"
        write_bytes_atomic(path, log_text.encode("utf-8"))
        return path
