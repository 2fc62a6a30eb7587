"""The catalog store: index verified bundles, look them up, record pushes and prunes.

Identity is the bundle file's sha256, so adding the same bundle twice gives
one row.  A bundle path holds one file at a time: when the recorder rewrites
a bundle (new golden verdicts), the row of the bytes that were there before
is kept as evidence and marked ``superseded_by`` the new file's sha256.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_trt.catalog.credentials import redact
from pytest_trt.catalog.database import connect, with_retries, write_transaction
from pytest_trt.catalog.fields import CatalogEntry, entry_from_bundle, iso_seconds, iso_utc

BUNDLE_GLOB = "*.tar.gz"
#: the sha256s of one bundle file's versions: the same path and the same engine.  The recorder rewrites a
#: bundle when new golden verdicts arrive and keeps only the latest verdict per test in it; the catalog keeps
#: every version's verdicts and approvals, and answers for the file with all of them.
LINEAGE = ("SELECT o.sha256 FROM bundles o JOIN bundles me ON o.path = me.path AND o.engine_sha256 = me.engine_sha256 "
           "WHERE me.sha256 = {sha}")
#: rows written per transaction by :meth:`Catalog.add_paths`
BATCH = 200


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


def verify_entry(path: Path, *, public_key: Path | None = None) -> CatalogEntry | AddResult:
    """The catalog entry of a verified bundle, or the :class:`AddResult` saying why there is none."""
    from pytest_trt.audit.attest_verify import build_times
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.errors import BundleIntegrityError

    try:
        vb = verify_bundle(path, public_key=public_key)
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


class Catalog:
    """One open catalog database (a context manager)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """``read_only``: for queries; nothing is written (see :func:`~pytest_trt.catalog.database.connect`)."""
        self.path = Path(path)
        self.read_only = read_only
        self.conn = connect(self.path, read_only=read_only)

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # -- writing ----------------------------------------------------------------
    def _insert(self, entry: CatalogEntry, indexed: str) -> bool:
        cols = entry.columns()
        cols["indexed"] = indexed
        cur = self.conn.execute(
            f"INSERT OR IGNORE INTO bundles ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})", cols)
        added = cur.rowcount == 1
        self.conn.execute("UPDATE bundles SET superseded_by = :sha WHERE path = :path AND sha256 != :sha "
                          "AND superseded_by IS NULL", {"sha": entry.sha256, "path": entry.path})
        self.conn.execute("UPDATE bundles SET superseded_by = NULL, path = :path WHERE sha256 = :sha",
                          {"sha": entry.sha256, "path": entry.path})
        if added:
            self.conn.executemany(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(entry.sha256, v.test, v.verdict, v.golden, v.generation, v.message,
                  json.dumps(v.metrics, sort_keys=True)) for v in entry.verdicts])
            self.conn.executemany(
                "INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?, ?, ?)",
                [(entry.sha256, a.test, a.golden, a.generation, a.approver, a.reason) for a in entry.approvals])
        return added

    def add_entries(self, entries: Sequence[CatalogEntry]) -> list[bool]:
        """Insert ``entries`` in one transaction; ``True`` for each that was new."""
        import time

        indexed = iso_utc(time.time())

        def run() -> list[bool]:
            with write_transaction(self.conn):
                return [self._insert(e, indexed) for e in entries]

        return with_retries(run)

    def add_paths(self, paths: Iterable[Path], *, public_key: Path | None = None) -> list[AddResult]:
        """Verify and index every bundle in ``paths`` (files or folders); refused ones are not indexed."""
        results: list[AddResult] = []
        pending: list[CatalogEntry] = []

        def flush() -> None:
            for entry, added in zip(pending, self.add_entries(pending), strict=True):
                results.append(AddResult(Path(entry.path), "added" if added else "known", entry.sha256))
            pending.clear()

        for path in bundle_paths(paths):
            got = verify_entry(path, public_key=public_key)
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
        return [dict(r) for r in with_retries(lambda: self.conn.execute(sql, params).fetchall())]

    def find(self, sha_prefix: str) -> list[dict[str, Any]]:
        """Bundles whose bundle sha256 or engine sha256 starts with ``sha_prefix`` (hex, at least one digit)."""
        prefix = sha_prefix.lower()
        if not prefix or prefix.strip("0123456789abcdef"):
            raise ValueError(f"{sha_prefix!r} is not a sha256 prefix (hexadecimal digits)")
        return self.rows("SELECT * FROM bundles WHERE substr(sha256, 1, :n) = :p OR substr(engine_sha256, 1, :n) = :p "
                         "ORDER BY created, sha256", {"n": len(prefix), "p": prefix})

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

