"""The catalog store: index verified bundles, look them up, record pushes and prunes.

Identity is the bundle file's sha256, so adding the same bundle twice gives
one row.  A bundle path holds one file at a time: when the recorder rewrites
a bundle (new golden verdicts), the row of the bytes that were there before
is kept as evidence and marked ``superseded_by`` the new file's sha256.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_trt.audit import BUNDLE_GLOB
from pytest_trt.catalog.credentials import redact
from pytest_trt.catalog.database import INTERNAL_COLUMNS, connect, with_retries, write_transaction
from pytest_trt.catalog.fields import CatalogEntry, entry_from_bundle, iso_seconds, iso_utc
from pytest_trt.catalog.lineage import join_lineage, refresh_lineage
from pytest_trt.common.filehash import stat_identity

#: the sha256s of one bundle file's versions: the same path and the same engine.  The recorder rewrites a
#: bundle when new golden verdicts arrive and keeps only the latest verdict per test in it; the catalog keeps
#: every version's verdicts and approvals, and answers for the file with all of them.
LINEAGE = ("SELECT o.sha256 FROM bundles o JOIN bundles me ON o.path = me.path AND o.engine_sha256 = me.engine_sha256 "
           "WHERE me.sha256 = {sha}")
#: rows written per transaction by :meth:`Catalog.add_paths`
BATCH = 200
#: a verified file's identity: size, mtime_ns, ctime_ns, inode, and the digest of its manifest and signature
#: (:func:`pytest_trt.audit.sidecar.members_digest`)
FileKey = tuple[int, int, int, int, str]


@dataclass(frozen=True)
class AddResult:
    """What happened to one path given to :meth:`Catalog.add_paths`."""

    path: Path
    status: str  # "added", "known" (already indexed), "refused" (failed verification), "error" (file problem)
    sha256: str | None = None
    reason: str | None = None


def bundle_paths(paths: Iterable[Path]) -> Iterator[Path]:
    """Each given file, and every ``*.tar.gz`` under each given folder (sorted)."""
    for p in paths:
        p = Path(p)
        if _is_dir(p):
            yield from sorted(q for q in p.rglob(BUNDLE_GLOB) if q.is_file())
        else:
            yield p  # a file, or a path this user cannot look at: verify_entry says why


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # Python 3.11 raises PermissionError where a parent folder cannot be searched
        return False


def verify_entry(path: Path, *, public_key: Path | None = None,
                 keys: dict[str, FileKey] | None = None) -> CatalogEntry | AddResult:
    """The catalog entry of a verified bundle, or the :class:`AddResult` saying why there is none.

    ``keys``: filled with the verified file's identity under its sha256 when the file kept one identity from
    before it was read to after (a file replaced meanwhile gets no key, so it is verified again next time).
    """
    from pytest_trt.audit.attest_verify import build_times
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.errors import BundleIntegrityError

    try:
        before = os.stat(path)
        vb = verify_bundle(path, public_key=public_key)
        if keys is not None:
            _keep_key(keys, path, before, vb)
        created = iso_utc(path.stat().st_mtime)
        started, finished, attestations = build_times(path, bundle_sha256=vb.sha256, engine_sha256=vb.engine_sha256)
    except BundleIntegrityError as exc:
        return AddResult(path, "refused", reason=exc.message)
    except FileNotFoundError:
        return AddResult(path, "error", reason=f"{path}: no such file")
    except (OSError, ValueError, ImportError) as exc:  # unreadable, bad key file, no cryptography
        return AddResult(path, "error", reason=f"{path}: {exc}")
    attested = iso_seconds(finished) if finished else None
    return with_approval_records(entry_from_bundle(vb, created=attested or created, build_started=started,
                                                   build_finished=finished, attestations=attestations))


def _keep_key(keys: dict[str, FileKey], path: Path, before: os.stat_result, vb: Any) -> None:
    from pytest_trt.audit.manifest import MANIFEST
    from pytest_trt.audit.sidecar import members_digest
    from pytest_trt.audit.sign import SIGNATURE

    after = os.stat(path)
    stat = stat_identity(before)
    if stat == stat_identity(after):
        keys[vb.sha256] = (*stat, members_digest(vb.members[MANIFEST], vb.members.get(SIGNATURE)))


def with_approval_records(entry: CatalogEntry) -> CatalogEntry:
    """Fill approver and reason from the golden folder's ``APPROVALS.jsonl`` where the bundle lacks them.

    A bundle's golden verdict names the golden file and generation an approved
    refresh wrote; who approved it and why is recorded next to the golden file.
    """
    import dataclasses

    from pytest_trt.golden.approvals import APPROVALS_FILE, read_jsonl

    approvals = []
    for a in entry.approvals:
        if a.approver is None and a.golden and (Path(a.golden).parent / APPROVALS_FILE).is_file():
            try:
                records = read_jsonl(Path(a.golden).parent)
            except (OSError, ValueError):
                records = []
            match = [r for r in records if r.get("file") == Path(a.golden).name and r.get("kind") != "cosign"
                     and r.get("generation") == a.generation and r.get("test") in (None, a.test)]
            if match:
                a = dataclasses.replace(a, approver=match[-1].get("approver"), reason=match[-1].get("reason"))
        approvals.append(a)
    return dataclasses.replace(entry, approvals=tuple(approvals))


def _fingerprint(public_key: Path) -> str | None:
    """The fingerprint of the key file, or None when it cannot be read (verification then says why)."""
    try:
        from pytest_trt.audit.sign import load_public_key, public_key_fingerprint

        return public_key_fingerprint(load_public_key(public_key))
    except (OSError, ValueError, ImportError):
        return None


class Catalog:
    """One open catalog database (a context manager)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """``read_only``: for queries; nothing is written (see :func:`~pytest_trt.catalog.database.connect`)."""
        self.path = Path(path)
        self.read_only = read_only
        self.conn = connect(self.path, read_only=read_only)
        self._devices: dict[tuple[str | None, str | None], int] = {}
        self._public: str | None = None

    def public_columns(self, alias: str) -> str:
        """``alias.column, ...`` of every ``bundles`` column a user reads (see :data:`INTERNAL_COLUMNS`)."""
        if self._public is None:
            names = [str(r[1]) for r in self.conn.execute("PRAGMA table_info(bundles)")]
            self._public = ", ".join("{a}." + n for n in names if n not in INTERNAL_COLUMNS)
        return self._public.format(a=alias)

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- writing ----------------------------------------------------------------
    def _device_id(self, device: str | None, device_json: str | None) -> int:
        key = (device, device_json)
        if key not in self._devices:  # a device row is never deleted: its id can be kept for the connection
            self.conn.execute("INSERT OR IGNORE INTO devices (device, device_json) VALUES (?, ?)", key)
            self._devices[key] = int(self.conn.execute(
                "SELECT id FROM devices WHERE ifnull(device, '') = ifnull(?, '') "
                "AND ifnull(device_json, '') = ifnull(?, '')", key).fetchone()[0])
        return self._devices[key]

    def _insert(self, entry: CatalogEntry, indexed: str, key: FileKey | None = None) -> bool:
        cols = entry.columns()
        cols["indexed"] = indexed
        cols["device_id"] = self._device_id(entry.device, entry.device_json)
        cur = self.conn.execute(
            f"INSERT OR IGNORE INTO bundles ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})", cols)
        added = cur.rowcount == 1
        before = {"path": entry.path, "engine_sha256": entry.engine_sha256} if added else self.conn.execute(
            "SELECT path, engine_sha256 FROM bundles WHERE sha256 = ?", (entry.sha256,)).fetchone()
        self.conn.execute("UPDATE bundles SET superseded_by = :sha WHERE path = :path AND sha256 != :sha "
                          "AND superseded_by IS NULL", {"sha": entry.sha256, "path": entry.path})
        self.conn.execute("UPDATE bundles SET superseded_by = NULL, path = :path WHERE sha256 = :sha",
                          {"sha": entry.sha256, "path": entry.path})
        if key is not None:
            self.conn.execute("UPDATE bundles SET size = ?, mtime_ns = ?, ctime_ns = ?, inode = ?, members_sha256 = ? "
                              "WHERE sha256 = ?", (*key, entry.sha256))
        if added:
            self.conn.executemany(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(entry.sha256, v.test, v.verdict, v.golden, v.generation, v.message,
                  json.dumps(v.metrics, sort_keys=True)) for v in entry.verdicts])
            self.conn.executemany(
                "INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?, ?, ?)",
                [(entry.sha256, a.test, a.golden, a.generation, a.approver, a.reason) for a in entry.approvals])
        if added or before["path"] != entry.path:
            join_lineage(self.conn, entry.sha256, entry.path, before["engine_sha256"])
        if before["path"] != entry.path:  # a known bundle moved: its old lineage lost a version
            refresh_lineage(self.conn, before["path"], before["engine_sha256"])
        return added

    def add_entries(self, entries: Sequence[CatalogEntry], keys: dict[str, FileKey] | None = None) -> list[bool]:
        """Insert ``entries`` in one transaction; ``True`` for each that was new.

        ``keys``: the verified files' identities by sha256 (see :func:`verify_entry`), for :meth:`known`.
        """
        import time

        indexed = iso_utc(time.time())
        keys = keys or {}

        def run() -> list[bool]:
            try:
                with write_transaction(self.conn):
                    return [self._insert(e, indexed, keys.get(e.sha256)) for e in entries]
            except BaseException:
                self._devices.clear()  # device rows this transaction made were rolled back with it
                raise

        return with_retries(run)

    def known(self, path: Path, *, signer: str | None = None) -> str | None:
        """The sha256 of the current row for ``path`` when the file is the one verified for it, else None.

        The file is the same when its size, mtime, ctime and inode equal the row's (ctime and inode cannot be set
        back, so an edit in place shows even with the mtime restored), when its sidecar, if any, names the same
        sha256, and, with ``signer`` (the fingerprint of ``--public-key``), when the row's signature was checked
        against that key.  A cache of a verification: ``pytest-trt bundle verify`` checks the bytes.
        """
        from pytest_trt.audit.sidecar import read_state

        try:
            st = os.stat(path)
            resolved = str(Path(path).resolve())
        except OSError:
            return None
        row = self.conn.execute("SELECT sha256, size, mtime_ns, ctime_ns, inode, signature_checked, signer_key_sha256 "
                                "FROM bundles WHERE path = ? AND superseded_by IS NULL", (resolved,)).fetchone()
        if row is None or (row["size"], row["mtime_ns"], row["ctime_ns"], row["inode"]) != stat_identity(st):
            return None
        state = read_state(Path(path))
        if state is not None and state.sha256 != row["sha256"]:
            return None
        if signer is not None and not (row["signature_checked"] and row["signer_key_sha256"] == signer):
            return None
        return str(row["sha256"])

    def add_paths(self, paths: Iterable[Path], *, public_key: Path | None = None) -> list[AddResult]:
        """Verify and index every bundle in ``paths`` (files or folders); refused ones are not indexed.

        A file the catalog verified before and that is unchanged since (:meth:`known`) is not read again.
        """
        results: list[AddResult] = []
        pending: list[CatalogEntry] = []
        keys: dict[str, FileKey] = {}
        signer = _fingerprint(public_key) if public_key is not None else None

        def flush() -> None:
            for entry, added in zip(pending, self.add_entries(pending, keys), strict=True):
                results.append(AddResult(Path(entry.path), "added" if added else "known", entry.sha256))
            pending.clear()
            keys.clear()

        for path in bundle_paths(paths):
            sha = self.known(path, signer=signer) if public_key is None or signer is not None else None
            if sha is not None:
                results.append(AddResult(path, "known", sha))
                continue
            got = verify_entry(path, public_key=public_key, keys=keys)
            if isinstance(got, AddResult):
                results.append(got)
                continue
            pending.append(got)
            if len(pending) >= BATCH:
                flush()
        flush()
        return results

    def record_push(self, sha256: str, *, uri: str, experiment: str, run_id: str, when: str) -> None:
        def run() -> None:
            with write_transaction(self.conn):
                self.conn.execute("INSERT OR REPLACE INTO pushes VALUES (?, ?, ?, ?, ?)",
                                  (sha256, uri, experiment, run_id, when))

        with_retries(run)

    def record_registration(self, sha256: str, *, uri: str, model_name: str, model_version: str, when: str) -> None:
        def run() -> None:
            with write_transaction(self.conn):
                self.conn.execute("INSERT OR REPLACE INTO registrations VALUES (?, ?, ?, ?, ?)",
                                  (sha256, uri, model_name, model_version, when))

        with_retries(run)

    def mark_pruned(self, sha256s: Sequence[str], *, when: str) -> None:
        def run() -> None:
            with write_transaction(self.conn):
                self.conn.executemany("UPDATE bundles SET pruned = ? WHERE sha256 = ?", [(when, s) for s in sha256s])

        with_retries(run)

    # -- reading ----------------------------------------------------------------
    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """Every row of ``sql`` as a dict by column name, as ``dict(sqlite3.Row)`` gives it (a name that two columns
        carry reads the first).  Each plain tuple is zipped with the names as it is read: no list of tuples or of
        ``sqlite3.Row`` is held beside the dicts."""
        def run() -> list[dict[str, Any]]:
            cur = self.conn.cursor()
            cur.row_factory = None
            cur.execute(sql, params)
            names, first = _columns(cur)
            if first is not None:
                return [dict(zip(names, (r[i] for i in first), strict=True)) for r in cur]
            return [dict(zip(names, r, strict=True)) for r in cur]

        return with_retries(run)

    def iter_rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Iterator[dict[str, Any]]:
        """:meth:`rows`, one dict at a time as the cursor reads it: a caller that writes each row out holds one row,
        not all of them. The statement starts with the same retries; a row is read only when asked for."""
        cur = self.conn.cursor()
        cur.row_factory = None
        with_retries(lambda: cur.execute(sql, params))
        names, first = _columns(cur)
        if first is not None:
            yield from (dict(zip(names, (r[i] for i in first), strict=True)) for r in cur)
        else:
            yield from (dict(zip(names, r, strict=True)) for r in cur)

    def find(self, sha_prefix: str) -> list[dict[str, Any]]:
        """Bundles whose bundle sha256 or engine sha256 starts with ``sha_prefix`` (hex, at least one digit)."""
        prefix = sha_prefix.lower()
        if not prefix or prefix.strip("0123456789abcdef"):
            raise ValueError(f"{sha_prefix!r} is not a sha256 prefix (hexadecimal digits)")
        return self.rows(f"SELECT {self.public_columns('b')} FROM bundles b WHERE (sha256 >= :p AND sha256 < :q) "
                         "OR (engine_sha256 >= :p AND engine_sha256 < :q) ORDER BY created, sha256",
                         {"p": prefix, "q": prefix + "g"})  # 'g' follows every hex digit

    def details(self, sha256: str) -> dict[str, list[dict[str, Any]]]:
        """Verdicts and approvals of one bundle's lineage (see :data:`LINEAGE`); its pushes and registrations."""
        out = {}
        for table in ("verdicts", "approvals"):
            out[table] = self.rows(
                f"SELECT t.* FROM {table} t JOIN bundles o ON o.sha256 = t.bundle_sha256 "
                f"WHERE t.bundle_sha256 IN ({LINEAGE.format(sha=':sha')}) "
                "GROUP BY t.test, " + ("t.verdict, t.golden, t.generation, t.metrics" if table == "verdicts" else
                                       "t.golden, t.generation") + " ORDER BY min(o.created), t.test", {"sha": sha256})
        for table in ("pushes", "registrations"):
            out[table] = [{**r, "uri": redact(r["uri"])}  # a catalog written before URIs were stored redacted
                          for r in self.rows(f"SELECT * FROM {table} WHERE bundle_sha256 = ?", (sha256,))]
        for v in out["verdicts"]:
            v["metrics"] = json.loads(v["metrics"])
        return out

    def count(self) -> int:
        return int(self.rows("SELECT count(*) AS n FROM bundles")[0]["n"])


def _columns(cur: Any) -> tuple[list[str], list[int] | None]:
    """A result's column names, each once, and the positions of their first columns where a name repeats (None when
    none does): a row then reads as ``dict(sqlite3.Row)`` gives it."""
    names = [d[0] for d in cur.description or ()]
    first = [i for i, name in enumerate(names) if names.index(name) == i]
    return ([names[i] for i in first], first) if len(first) < len(names) else (names, None)
