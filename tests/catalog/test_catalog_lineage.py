"""The rewritten filters and the kept lineage facts answer exactly what the per-row subqueries answered.

The reference is the catalog's former SQL, run on a catalog at schema version 2 (before the indexes and the
lineage columns): the same catalog, migrated, must give the same rows, verdicts and approval counts.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.catalog.database import INTERNAL_COLUMNS, MIGRATIONS
from pytest_trt.catalog.fields import CatalogEntry, Verdict
from pytest_trt.catalog.query import VERDICT_ALIASES, Filters, jsonable, query
from pytest_trt.catalog.store import Catalog
from tests.catalog.test_catalog_plans import synthetic_entries, vm_steps

_OLD_VERDICTS = ("(SELECT group_concat(verdict, ',') FROM (SELECT DISTINCT v.verdict FROM verdicts v "
                 "JOIN bundles o ON o.sha256 = v.bundle_sha256 WHERE o.path = b.path "
                 "AND o.engine_sha256 = b.engine_sha256 ORDER BY v.verdict)) AS verdicts")
_OLD_APPROVALS = ("(SELECT count(DISTINCT a.test || ' ' || ifnull(a.golden, '') || ' ' || ifnull(a.generation, '')) "
                  "FROM approvals a JOIN bundles o ON o.sha256 = a.bundle_sha256 "
                  "WHERE o.path = b.path AND o.engine_sha256 = b.engine_sha256) AS approvals")


def _old_where(f: Filters) -> tuple[str, list[Any]]:
    """The filters as per-row tests (text functions, GLOB, LIKE on every row): slow, and the reference."""
    clauses, params = [], []
    if f.config:
        clauses.append("b.config_name GLOB ?")
        params.append(f.config)
    if f.backend:
        clauses.append("b.backend = ?")
        params.append(f.backend)
    if f.backend_version:
        clauses.append("(b.backend_version = ? OR b.backend_version GLOB ?)")
        params += [f.backend_version, f.backend_version + ".*"]
    if f.device:
        clauses.append("(instr(lower(b.device), lower(?)) > 0 OR instr(lower(b.device_json), lower(?)) > 0)")
        params += [f.device, f.device]
    if f.calibration:
        clauses.append("replace(replace(lower(b.calibration_algorithm), '-', ''), '_', '') = ?")
        params.append(re.sub(r"[-_]", "", f.calibration.lower()))
    if f.verdict:
        names = VERDICT_ALIASES.get(f.verdict.lower(), (f.verdict.lower(),))
        clauses.append("EXISTS (SELECT 1 FROM verdicts v JOIN bundles o ON o.sha256 = v.bundle_sha256 "
                       "WHERE o.path = b.path AND o.engine_sha256 = b.engine_sha256 "
                       f"AND v.verdict IN ({', '.join('?' * len(names))}))")
        params += list(names)
    if f.engine_sha256:
        clauses.append("substr(b.engine_sha256, 1, ?) = ?")
        params += [len(f.engine_sha256), f.engine_sha256]
    if f.since:
        clauses.append("b.created >= ?")
        params.append(f.since)
    if not f.include_all:
        clauses.append("b.superseded_by IS NULL AND b.pruned IS NULL")
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


#: columns migrations after schema version 2 added (the build's clock times and its attestations)
LATER = ("build_started", "build_finished", "attestations")


def _schema2_catalog(db: Path, entries: list[CatalogEntry]) -> None:
    """A catalog as the release at schema version 2 wrote it."""
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + ";" + MIGRATIONS[1] + "; PRAGMA user_version = 2;")
    for e in entries:
        cols = {k: v for k, v in {**e.columns(), "indexed": "2026-01-01T00:00:00Z"}.items() if k not in LATER}
        conn.execute(f"INSERT OR IGNORE INTO bundles ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})",
                     cols)
        conn.execute("UPDATE bundles SET superseded_by = ? WHERE path = ? AND sha256 != ? AND superseded_by IS NULL",
                     (e.sha256, e.path, e.sha256))
        conn.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(e.sha256, v.test, v.verdict, v.golden, v.generation, v.message, json.dumps(v.metrics))
                          for v in e.verdicts])
        conn.executemany("INSERT OR REPLACE INTO approvals VALUES (?, ?, ?, ?, ?, ?)",
                         [(e.sha256, a.test, a.golden, a.generation, a.approver, a.reason) for a in e.approvals])
    conn.commit()
    conn.close()


def _old_query(db: Path, f: Filters) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    clause, params = _old_where(f)
    rows = conn.execute(f"SELECT b.*, {_OLD_VERDICTS}, {_OLD_APPROVALS} FROM bundles b {clause} "
                        "ORDER BY b.created, b.sha256", params).fetchall()
    conn.close()
    # the same catalog after its migration has more columns
    return [{k: r[k] for k in r.keys() if k not in INTERNAL_COLUMNS} for r in rows]


FILTER_SETS = [
    Filters(), Filters(include_all=True), Filters(verdict="regression"), Filters(verdict="updated", include_all=True),
    Filters(backend_version="8.6"), Filters(backend_version="10.*", device="h100"), Filters(device="a100-SXM4"),
    Filters(calibration="MIN_MAX", verdict="fail"), Filters(config="model_1*", since="2026-06-01T00:00:00Z"),
    Filters(engine_sha256="a", backend="tensorrt"), Filters(device="kind\":\"cpu", verdict="pass", include_all=True),
]


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("lineage") / "c.sqlite"
    _schema2_catalog(db, synthetic_entries(400))
    return db


@pytest.mark.parametrize("f", FILTER_SETS, ids=[f"set{i}" for i in range(len(FILTER_SETS))])
def test_a_migrated_catalog_answers_as_before(migrated, f):
    expected = _old_query(migrated, f)
    with Catalog(migrated) as cat:
        got = query(cat, f)
    assert expected, f  # a filter that matches nothing proves nothing
    assert all(r[k] is None for r in got for k in LATER)  # rows indexed before the clock times and attestations
    got, expected = ([{k: v for k, v in r.items() if k not in LATER} for r in rows] for rows in (got, expected))
    assert json.dumps(jsonable(got), sort_keys=True) == json.dumps(jsonable(expected), sort_keys=True)


def test_a_catalog_filled_now_answers_as_the_reference(tmp_path):
    """Rows inserted through add_entries (lineage facts kept per insert) equal the reference over the same rows."""
    entries = synthetic_entries(250)
    _schema2_catalog(tmp_path / "old.sqlite", entries)
    with Catalog(tmp_path / "new.sqlite") as cat:
        for i in range(0, len(entries), 37):  # several transactions: facts kept across them
            cat.add_entries(entries[i:i + 37])
        for f in FILTER_SETS:
            old = [{k: r[k] for k in ("sha256", "verdicts", "approvals", "superseded_by")}
                   for r in _old_query(tmp_path / "old.sqlite", f)]
            assert [{k: r[k] for k in ("sha256", "verdicts", "approvals", "superseded_by")}
                    for r in query(cat, f)] == old, f


def _entry(sha: str, path: str, verdict: str, *, engine: str = "e" * 64, version: str = "8.6.1.6") -> CatalogEntry:
    base = synthetic_entries(1)[0]
    return dataclasses.replace(base, sha256=sha, path=path, engine_sha256=engine, backend_version=version,
                               created=f"2026-03-{int(sha[0], 16) + 1:02d}T00:00:00Z",
                               verdicts=(Verdict("t.py::acc", verdict, "g/m.h5", 1, None, {}),), approvals=())


def test_backend_version_prefix_and_engine_prefix(tmp_path):
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_entries([_entry("1" * 64, "/a.tar.gz", "pass", version="8.6.1.6", engine="ab" + "0" * 62),
                         _entry("2" * 64, "/b.tar.gz", "pass", version="8.60.1"),
                         _entry("3" * 64, "/c.tar.gz", "pass", version="8.6"),
                         _entry("4" * 64, "/d.tar.gz", "pass", version="8.6-rc1")])
        assert [r["sha256"][0] for r in query(cat, Filters(backend_version="8.6"))] == ["1", "3"]
        assert [r["sha256"][0] for r in query(cat, Filters(engine_sha256="AB"))] == ["1"]
        assert [r["sha256"][0] for r in query(cat, Filters(engine_sha256="ab0" + "0" * 61))] == ["1"]
        assert [r["sha256"][0] for r in cat.find("ab")] == ["1"]
        assert [r["sha256"][0] for r in cat.find("22")] == ["2"]
        assert "lineage_verdicts" not in query(cat, Filters())[0] and "mtime_ns" not in cat.find("22")[0]


def test_regression_of_an_older_version_marks_the_lineage(tmp_path):
    """The recorder rewrites a bundle keeping the latest verdict: the catalog still answers for the failure."""
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_entries([_entry("1" * 64, "/m.tar.gz", "fail")])
        cat.add_entries([_entry("2" * 64, "/m.tar.gz", "updated")])
        rows = query(cat, Filters(verdict="regression"))
        assert [(r["sha256"][0], r["verdicts"]) for r in rows] == [("2", "fail,updated")]


def test_a_moved_bundle_refreshes_both_lineages(tmp_path):
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_entries([_entry("1" * 64, "/old/m.tar.gz", "fail"), _entry("2" * 64, "/new/m.tar.gz", "pass")])
        assert [r["path"] for r in query(cat, Filters(verdict="fail"))] == ["/old/m.tar.gz"]
        cat.add_entries([_entry("1" * 64, "/new/m.tar.gz", "fail")])  # the same file, now at the new path
        rows = query(cat, Filters(include_all=True))
        assert {r["sha256"][0]: (r["path"], r["verdicts"]) for r in rows} == {
            "1": ("/new/m.tar.gz", "fail,pass"), "2": ("/new/m.tar.gz", "fail,pass")}
        assert query(cat, Filters(verdict="fail", include_all=True, config="model_*")) == \
            query(cat, Filters(verdict="fail", include_all=True))
        assert cat.rows("SELECT count(*) AS n FROM lineage_verdicts WHERE path = '/old/m.tar.gz'")[0]["n"] == 0


def _night(night: int, i: int) -> CatalogEntry:
    """Bundle ``i`` as night ``night`` rewrote it: path 0 fails on night 7; path 1 is approved on nights 20 and 30
    (the same approval key twice: counted once) and 33 (a new generation); path 2's engine changes on night 25."""
    from pytest_trt.catalog.fields import ApprovalRef

    base = synthetic_entries(1)[0]
    verdict = "fail" if (i, night) == (0, 7) else "updated" if (i, night) in ((1, 20), (1, 30), (1, 33)) else "pass"
    approvals = (ApprovalRef("t.py::acc", "g/m.h5", 2 if night == 33 else 1, "ann", "ok"),) if verdict == "updated" \
        else ()
    engine = ("f" if i == 2 and night >= 25 else str(i)) * 64
    return dataclasses.replace(base, sha256=f"{night:04d}{i:02d}".ljust(64, "0"), path=f"/ci/b{i}.tar.gz",
                               engine_sha256=engine, created=f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T02:00:00Z",
                               verdicts=(Verdict("t.py::acc", verdict, "g/m.h5", 1, None, {}),), approvals=approvals)


def test_nightly_rewrites_keep_each_lineage_as_the_reference(tmp_path):
    """A lineage grown one version a night (its verdict names and approvals kept as each version joins) answers as
    the former per-row subqueries over the same rows, night after night."""
    added: list[CatalogEntry] = []
    keys = ("sha256", "verdicts", "approvals", "superseded_by")
    with Catalog(tmp_path / "new.sqlite") as cat:
        for night in range(40):
            batch = [_night(night, i) for i in range(3)]
            cat.add_entries(batch)
            added += batch
            if night % 4 == 3 or night in (7, 20, 25, 30, 33):
                old = tmp_path / f"old{night}.sqlite"
                _schema2_catalog(old, added)
                for f in (Filters(include_all=True), Filters(verdict="regression", include_all=True), Filters()):
                    assert [{k: r[k] for k in keys} for r in query(cat, f)] == \
                        [{k: r[k] for k in keys} for r in _old_query(old, f)], (night, f)
        rows = {r["sha256"][:6]: r for r in query(cat, Filters(include_all=True))}
    assert rows["003900"]["verdicts"] == "fail,pass" and rows["003901"]["verdicts"] == "pass,updated"
    assert rows["003901"]["approvals"] == rows["000001"]["approvals"] == 2  # the lineage's, on every version
    assert rows["003902"]["verdicts"] == "pass" and rows["002402"]["superseded_by"] == rows["002502"]["sha256"]


def _add_steps(cat: Catalog, entry: CatalogEntry) -> int:
    """SQLite virtual machine instructions that adding ``entry`` ran."""
    return vm_steps(cat, lambda: cat.add_entries([entry]))[0]


def test_adding_a_version_does_not_read_the_lineage_history(tmp_path):
    """The 200th nightly rewrite of a bundle costs what the 6th does: the path's current row is found through its
    index, the verdict names grow by the new version's, and the lineage's other rows are not rewritten."""
    with Catalog(tmp_path / "c.sqlite") as cat:
        for night in range(200):
            if night == 5:
                early = _add_steps(cat, _night(night, 0))
            elif night == 199:
                late = _add_steps(cat, _night(night, 0))
            else:
                cat.add_entries([_night(night, 0)])
        assert cat.count() == 200
    assert late < 1.5 * early, (early, late)
