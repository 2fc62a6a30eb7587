"""The catalog database: connection settings, busy retries and versioned migrations.

SQLite in WAL mode: readers never block the one writer, and writers from
several pytest-xdist workers or concurrent sessions queue on SQLite's own
lock (``busy_timeout``) instead of failing.  Every write runs in a
``BEGIN IMMEDIATE`` transaction, which takes the write lock up front, so a
transaction never has to be abandoned half-way because another writer got
the lock between its read and its write.

The schema version is ``PRAGMA user_version``.  :data:`MIGRATIONS` holds one
script per version; opening a database applies, in one transaction each, the
scripts it has not seen yet.  A database written by a newer pytest-trt (a
higher version) is refused rather than misread.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pytest_trt.errors import CatalogError

T = TypeVar("T")

#: seconds SQLite itself waits for a lock before reporting "database is locked"
BUSY_TIMEOUT_S = 30.0
#: attempts of a whole operation that still met a busy database (e.g. while WAL mode is switched on)
RETRIES = 8

#: version n is reached by running MIGRATIONS[n - 1]; append, never edit a released entry
MIGRATIONS: tuple[str, ...] = (
    # 1: bundles, their golden verdicts and approvals
    """
    CREATE TABLE bundles (
        sha256 TEXT PRIMARY KEY,
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        config_name TEXT,
        config_version TEXT,
        backend TEXT,
        backend_version TEXT,
        cuda_runtime TEXT,
        cuda_driver TEXT,
        device TEXT,
        device_json TEXT,
        engine_sha256 TEXT NOT NULL,
        engine_included INTEGER NOT NULL,
        onnx_sha256 TEXT,
        config_hash TEXT,
        config_sha256 TEXT,
        calibration_algorithm TEXT,
        calibration_cache_sha256 TEXT,
        git_commit TEXT,
        git_dirty INTEGER,
        created TEXT NOT NULL,
        indexed TEXT NOT NULL,
        signer_key_sha256 TEXT,
        signature_checked INTEGER NOT NULL DEFAULT 0,
        superseded_by TEXT,
        pruned TEXT
    );
    CREATE INDEX bundles_config ON bundles (config_name, created);
    CREATE INDEX bundles_backend_version ON bundles (backend_version);
    CREATE INDEX bundles_device ON bundles (device);
    CREATE INDEX bundles_engine ON bundles (engine_sha256);
    CREATE INDEX bundles_created ON bundles (created);
    CREATE INDEX bundles_path ON bundles (path);
    CREATE TABLE verdicts (
        bundle_sha256 TEXT NOT NULL REFERENCES bundles (sha256) ON DELETE CASCADE,
        test TEXT NOT NULL,
        verdict TEXT NOT NULL,
        golden TEXT,
        generation INTEGER,
        message TEXT,
        metrics TEXT NOT NULL,
        PRIMARY KEY (bundle_sha256, test)
    );
    CREATE INDEX verdicts_verdict ON verdicts (verdict, bundle_sha256);
    CREATE TABLE approvals (
        bundle_sha256 TEXT NOT NULL REFERENCES bundles (sha256) ON DELETE CASCADE,
        test TEXT NOT NULL,
        golden TEXT,
        generation INTEGER,
        approver TEXT,
        reason TEXT,
        PRIMARY KEY (bundle_sha256, test)
    );
    """,
    # 2: what was pushed to MLflow and which model versions were registered
    """
    CREATE TABLE pushes (
        bundle_sha256 TEXT NOT NULL REFERENCES bundles (sha256) ON DELETE CASCADE,
        uri TEXT NOT NULL,
        experiment TEXT NOT NULL,
        run_id TEXT NOT NULL,
        time TEXT NOT NULL,
        PRIMARY KEY (bundle_sha256, uri)
    );
    CREATE TABLE registrations (
        bundle_sha256 TEXT NOT NULL REFERENCES bundles (sha256) ON DELETE CASCADE,
        uri TEXT NOT NULL,
        model_name TEXT NOT NULL,
        model_version TEXT NOT NULL,
        time TEXT NOT NULL,
        PRIMARY KEY (bundle_sha256, uri, model_name)
    );
    """,
    # 3: the build's clock times and the attestations beside the bundle (in-toto JSON lines)
    """
    ALTER TABLE bundles ADD COLUMN build_started TEXT;
    ALTER TABLE bundles ADD COLUMN build_finished TEXT;
    ALTER TABLE bundles ADD COLUMN attestations TEXT;
    """,
    # 4: every query filter index-driven; each lineage's verdicts and approvals kept with its rows; the file's
    # identity (stat and members digest) at verification, so an unchanged bundle is known without reading it
    """
    CREATE TABLE devices (id INTEGER PRIMARY KEY, device TEXT, device_json TEXT);
    CREATE UNIQUE INDEX devices_key ON devices (ifnull(device, ''), ifnull(device_json, ''));
    INSERT OR IGNORE INTO devices (device, device_json) SELECT DISTINCT device, device_json FROM bundles;
    ALTER TABLE bundles ADD COLUMN device_id INTEGER REFERENCES devices (id);
    UPDATE bundles SET device_id = (SELECT d.id FROM devices d WHERE ifnull(d.device, '') = ifnull(bundles.device, '')
                                    AND ifnull(d.device_json, '') = ifnull(bundles.device_json, ''));
    CREATE INDEX bundles_device_id ON bundles (device_id);
    DROP INDEX bundles_device;
    DROP INDEX bundles_path;
    CREATE INDEX bundles_lineage ON bundles (path, engine_sha256);
    CREATE INDEX bundles_backend ON bundles (backend, backend_version);
    CREATE INDEX bundles_calibration ON bundles (replace(replace(lower(calibration_algorithm), '-', ''), '_', ''));
    DROP INDEX bundles_created;
    CREATE INDEX bundles_created ON bundles (created, sha256);
    CREATE TABLE lineage_verdicts (verdict TEXT NOT NULL, path TEXT NOT NULL, engine_sha256 TEXT NOT NULL,
                                   PRIMARY KEY (verdict, path, engine_sha256)) WITHOUT ROWID;
    CREATE INDEX lineage_verdicts_key ON lineage_verdicts (path, engine_sha256);
    INSERT OR IGNORE INTO lineage_verdicts SELECT DISTINCT v.verdict, o.path, o.engine_sha256
        FROM verdicts v JOIN bundles o ON o.sha256 = v.bundle_sha256;
    ALTER TABLE bundles ADD COLUMN lineage_verdicts TEXT;
    ALTER TABLE bundles ADD COLUMN lineage_approvals INTEGER NOT NULL DEFAULT 0;
    UPDATE bundles SET (lineage_verdicts, lineage_approvals) = (
        (SELECT group_concat(verdict, ',') FROM (SELECT lv.verdict FROM lineage_verdicts lv
            WHERE lv.path = bundles.path AND lv.engine_sha256 = bundles.engine_sha256 ORDER BY lv.verdict)),
        (SELECT count(DISTINCT a.test || ' ' || ifnull(a.golden, '') || ' ' || ifnull(a.generation, ''))
            FROM bundles o CROSS JOIN approvals a ON a.bundle_sha256 = o.sha256
            WHERE o.path = bundles.path AND o.engine_sha256 = bundles.engine_sha256));
    ALTER TABLE bundles ADD COLUMN mtime_ns INTEGER;
    ALTER TABLE bundles ADD COLUMN ctime_ns INTEGER;
    ALTER TABLE bundles ADD COLUMN inode INTEGER;
    ALTER TABLE bundles ADD COLUMN members_sha256 TEXT
    """,
    # 5: runs night after night rewrite the same bundle paths, and every rewrite is kept: the current bundles
    # (neither superseded nor pruned) in creation order, which a query of the current bundles reads instead of every
    # rewrite before them; and the file now at each path, which an add supersedes without reading the path's history
    """
    CREATE INDEX bundles_current ON bundles (created, sha256) WHERE superseded_by IS NULL AND pruned IS NULL;
    CREATE INDEX bundles_current_path ON bundles (path) WHERE superseded_by IS NULL
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
#: the oldest schema a read-only connection reads as it is: the migrations after it only add indexes, so a reader
#: without write access to a shared catalog still gets its answers (through the indexes the catalog has)
READABLE_FROM = 4


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def with_retries(operation: Callable[[], T], *, attempts: int = RETRIES) -> T:
    """Run ``operation``, again with jittered back-off while SQLite reports a busy database."""
    for attempt in range(attempts):
        try:
            return operation()
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or attempt == attempts - 1:
                raise
            time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    with write_transaction(conn):
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise CatalogError(
                f"{path}: catalog schema version {version} is newer than this pytest-trt reads "
                f"({SCHEMA_VERSION}); upgrade pytest-trt to use it",
                path=str(path),
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")


#: the tables whose ``uri`` is an MLflow tracking URI (the push key)
URI_TABLES = ("pushes", "registrations")
#: a row whose URI holds credentials (the cheap test first: most URIs have no '@')
_HELD = "instr(uri, '@') > 0 AND pytest_trt_redact(uri) != uri"


def scrub_credentials(conn: sqlite3.Connection) -> int:
    """Rewrite the rows an earlier release stored with ``user:password@`` in their MLflow URI to the redacted key.

    The old bytes are overwritten (``secure_delete``) and the WAL is truncated, so the password leaves the file;
    a row whose redacted twin exists already is dropped.  Returns how many rows held credentials (0: nothing written).
    """
    from pytest_trt.catalog.credentials import redact

    conn.create_function("pytest_trt_redact", 1, redact, deterministic=True)
    held = sum(int(conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {_HELD}").fetchone()[0]) for table in URI_TABLES)
    if not held:
        return 0
    conn.execute("PRAGMA secure_delete = ON")
    with write_transaction(conn):
        for table in URI_TABLES:
            conn.execute(f"UPDATE OR IGNORE {table} SET uri = pytest_trt_redact(uri) WHERE {_HELD}")
            conn.execute(f"DELETE FROM {table} WHERE {_HELD}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return held


#: the tables of a catalog, each with the schema version that created it (SQLite's own ``sqlite_*`` tables aside)
TABLE_VERSIONS = {"bundles": 1, "verdicts": 1, "approvals": 1, "pushes": 2, "registrations": 2, "devices": 4,
                  "lineage_verdicts": 4}
CATALOG_TABLES = frozenset(TABLE_VERSIONS)
#: columns of ``bundles`` that serve queries and the known-file check, not the row a user reads
INTERNAL_COLUMNS = ("device_id", "lineage_verdicts", "lineage_approvals", "mtime_ns", "ctime_ns", "inode",
                    "members_sha256")


def _version_and_tables(conn: sqlite3.Connection) -> tuple[int, set[str]]:
    """The schema version and the tables, read in one statement: one snapshot, so a writer that creates the tables
    and sets the version in one transaction is never seen half done (tables, version 0)."""
    version, names = conn.execute("SELECT (SELECT user_version FROM pragma_user_version), "
                                  "(SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')"
                                  ).fetchone()
    return int(version), {t for t in str(names or "").split("\x1f") if t and not t.startswith("sqlite_")}


def check_catalog(conn: sqlite3.Connection, path: Path, *, read_only: bool) -> None:
    """Refuse another application's database, and (``read_only``) one this version cannot read as it is.

    A writer may migrate an older catalog; a reader reads one from :data:`READABLE_FROM` on.
    """
    version, tables = _version_and_tables(conn)
    if version > SCHEMA_VERSION:
        raise CatalogError(f"{path}: catalog schema version {version} is newer than this pytest-trt reads "
                           f"({SCHEMA_VERSION}); upgrade pytest-trt to use it", path=str(path))
    # version 0 with tables: another application's (a catalog gets its tables and version in one transaction)
    expected = {t for t, since in TABLE_VERSIONS.items() if version >= since}
    if (tables and version == 0) or tables - CATALOG_TABLES or (version and not expected <= tables):
        held = ", ".join(sorted(tables)) or "no tables"
        raise CatalogError(f"{path}: not a pytest-trt catalog (it holds {held}, schema version {version}); "
                           "nothing was written to it: give another --db path", path=str(path))
    if read_only and version < READABLE_FROM:
        what = "empty" if version == 0 else f"at schema version {version} (this pytest-trt reads {SCHEMA_VERSION})"
        raise CatalogError(f"{path}: the catalog is {what}; index bundles or migrate it with "
                           f"'pytest-trt catalog add trt-bundles --db {path}' (needs write access)", path=str(path))


#: how much of the catalog file a reader maps into memory: a query that returns many rows reads them in index order,
#: from pages all over the file; mapped, each row is read in place instead of through a ``read`` call and a copy into
#: SQLite's 2 MiB page cache (which a catalog of 100,000 bundles overflows many times).  The catalog is never
#: truncated (no VACUUM), the case where a mapped read would fail.
READ_MMAP_BYTES = 1 << 30


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """``mode=ro``, or ``immutable=1`` where that would create files another user owns or SQLite cannot share.

    A WAL reader needs the ``-shm`` index: ``mode=ro`` creates it (and ``-wal``) in a writable folder, owned by
    the reader.  For a catalog this user cannot write, without those files, it is read ``immutable`` instead:
    nothing is created, and with no ``-wal`` the main file holds every committed row.
    """
    base = path.resolve().as_uri()
    shared_index = path.with_name(path.name + "-shm").exists()
    queries = ("?mode=ro", "?mode=ro&immutable=1") if os.access(path, os.W_OK) or shared_index else \
        ("?mode=ro&immutable=1",)
    last: sqlite3.OperationalError | None = None
    for query in queries:
        conn = sqlite3.connect(base + query, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                               check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            check_catalog(conn, path, read_only=True)
            conn.execute(f"PRAGMA mmap_size = {READ_MMAP_BYTES}")
        except sqlite3.OperationalError as exc:
            conn.close()
            text = str(exc).lower()
            if _busy(exc) or not ("unable to open" in text or "readonly" in text or "read-only" in text):
                raise
            last = exc
            continue
        except BaseException:
            conn.close()
            raise
        return conn
    assert last is not None
    raise last


def connect(path: Path, *, migrate: bool = True, read_only: bool = False) -> sqlite3.Connection:
    """Open (creating and migrating) the catalog at ``path``; raises :class:`CatalogError` for unusable files.

    ``read_only`` opens an existing catalog without writing anything: no WAL switch, no migration, no
    ``-wal``/``-shm`` files where the folder is not writable (another user's catalog, a read-only mount).
    """
    path = Path(path)

    def open_it() -> sqlite3.Connection:
        if read_only:
            return _connect_read_only(path)
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            conn.row_factory = sqlite3.Row
            check_catalog(conn, path, read_only=False)  # before anything is written to it
            conn.execute("PRAGMA foreign_keys = ON")
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable at checkpoints, never corrupt
            if migrate:
                _migrate(conn, path)
                scrub_credentials(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    try:
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and not os.access(path, os.W_OK):
                raise sqlite3.OperationalError("attempt to write a readonly database")
        return with_retries(open_it)
    except OSError as exc:
        raise CatalogError(f"{path}: cannot create the catalog's folder ({exc.strerror}); give another --db path",
                           path=str(path)) from None
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and _busy(exc):
            raise CatalogError(f"{path}: catalog stayed locked by another writer ({exc}); try again",
                               path=str(path)) from None
        if read_only:
            raise CatalogError(f"{path}: cannot read the catalog ({exc}); check that this user may read the file "
                               "and its folder", path=str(path)) from None
        if "readonly" in str(exc).lower() or "read-only" in str(exc).lower():
            raise CatalogError(f"{path}: the catalog is read-only for this user ({exc}); this command writes to "
                               "it: run it where the catalog is writable, or give another --db path",
                               path=str(path)) from None
        raise CatalogError(f"{path}: not a usable catalog database ({exc}); give another --db path",
                           path=str(path)) from None
