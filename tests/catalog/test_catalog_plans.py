"""Every catalog query is answered through indexes: ``EXPLAIN QUERY PLAN`` of each filter set.

The catalog here holds a few hundred rows, inserted through ``Catalog.add_entries`` without ``ANALYZE``: the
planner then has no statistics and chooses by the indexes alone, as it does on a catalog of any size.  A plan
that scans ``bundles`` (or a verdict table) for a filtered query costs time in proportion to the whole catalog,
for every query; one that scans per candidate row is quadratic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.catalog.fields import ApprovalRef, CatalogEntry, Verdict
from pytest_trt.catalog.query import Filters, history, query
from pytest_trt.catalog.store import Catalog

OPTIONS: dict[str, str] = {
    "config": "model_1*", "backend": "tensorrt", "backend_version": "8.6", "device": "A100",
    "calibration": "min-max", "verdict": "regression", "engine_sha256": "ab12", "since": "2026-06-01T00:00:00Z",
}
#: a scan of any table but ``devices`` (one row per device), or of ``bundles`` other than in creation order (all its
#: rows, or the current ones)
_SCAN = re.compile(r"^SCAN (?!d\b)(?!b USING INDEX bundles_(created|current)$)")
_DEVICES = ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L4", None)


def synthetic_entries(n: int) -> list[CatalogEntry]:
    """``n`` rows with varied configs, backends, devices, calibrators and verdicts; one in five rewrites a path."""
    entries: list[CatalogEntry] = []
    lineages: list[tuple[str, str]] = []
    for i in range(n):
        sha = hashlib.sha256(f"row {i}".encode()).hexdigest()
        if lineages and i % 5 == 4:
            path, engine = lineages[(i * 7) % len(lineages)]
        else:
            path, engine = f"/archive/{sha}.tar.gz", hashlib.sha256(sha.encode()).hexdigest()
            lineages.append((path, engine))
        backend, version = (("tensorrt", "8.6.1.6"), ("tensorrt", "10.3.0.26"), ("onnxruntime", "1.23.2"))[i % 3]
        device = _DEVICES[i % 4]
        verdict = ("pass", "pass", "fail", "updated", "pass", "regression")[i % 6]
        entries.append(CatalogEntry(
            sha256=sha, path=path, size=1000, config_name=f"model_{i % 20}", config_version="1.0", backend=backend,
            backend_version=version, cuda_runtime="12.4", cuda_driver="550", device=device,
            device_json=json.dumps({"kind": "gpu", "name": device}) if device else '{"kind":"cpu"}',
            engine_sha256=engine, engine_included=True, onnx_sha256=sha, config_hash=sha[:16], config_sha256=sha,
            calibration_algorithm=("minmax", "entropy2", None)[i % 3], calibration_cache_sha256=None,
            git_commit=sha[:40], git_dirty=False, created=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00Z",
            signer_key_sha256=None, signature_checked=False,
            verdicts=(Verdict("t.py::acc", verdict, "g/m.h5", 1, None, {"l2_delta": 0.1}),),
            approvals=(ApprovalRef("t.py::acc", "g/m.h5", 1, "ann", "ok"),) if verdict == "updated" else ()))
    return entries


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Catalog(tmp_path_factory.mktemp("plans") / "c.sqlite") as cat:
        cat.add_entries(synthetic_entries(300))
        yield cat


def _statements(cat: Catalog, monkeypatch: pytest.MonkeyPatch, call: Any) -> list[tuple[str, Any]]:
    """Every statement ``call`` runs through ``Catalog.rows``, with its parameters."""
    seen: list[tuple[str, Any]] = []
    real = Catalog.rows

    def rows(self: Catalog, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        seen.append((sql, params))
        return real(self, sql, params)

    monkeypatch.setattr(Catalog, "rows", rows)
    call()
    monkeypatch.undo()
    assert seen
    return seen


def _plan(cat: Catalog, sql: str, params: Any) -> list[str]:
    return [str(r[3]) for r in cat.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]


def _filter_sets() -> list[tuple[tuple[str, ...], bool]]:
    keys = [()] + [(k,) for k in OPTIONS] + list(itertools.combinations(OPTIONS, 2)) + [tuple(OPTIONS)]
    return [(k, include_all) for k in keys for include_all in (False, True)]


@pytest.mark.parametrize(("keys", "include_all"), _filter_sets(), ids=lambda v: "+".join(v) if isinstance(v, tuple)
                         else ("all" if v else "current"))
def test_every_filter_set_is_index_driven(catalog, monkeypatch, keys, include_all):
    f = Filters(**{k: OPTIONS[k] for k in keys}, include_all=include_all)
    for sql, params in _statements(catalog, monkeypatch, lambda: query(catalog, f)):
        plan = _plan(catalog, sql, params)
        assert not [line for line in plan if _SCAN.match(line)], (keys, plan)
        if any(line.startswith("CORRELATED") for line in plan):  # a probe per candidate row: by its lineage key
            probes = [line for line in plan if line.startswith("SEARCH lv")]
            assert probes and all("(path=? AND engine_sha256=?" in line for line in probes), (keys, plan)
        if keys:
            assert not [line for line in plan if line.startswith("SCAN b")], (keys, plan)
        else:  # every row, read in the order given: no sort of the whole catalog
            assert "USE TEMP B-TREE FOR ORDER BY" not in plan, plan
            if not include_all:  # the current rows only, not the superseded and pruned ones before them
                assert plan == ["SCAN b USING INDEX bundles_current"], plan


def test_the_filter_sets_match_rows(catalog):
    """The plans above are of queries that answer something: each option alone matches rows here."""
    for key, value in OPTIONS.items():
        if key != "engine_sha256":
            assert query(catalog, Filters(**{key: value})), key


def test_find_details_and_history_are_index_driven(catalog, monkeypatch):
    row = query(catalog, Filters(limit=1))[0]
    for call in (lambda: catalog.find(row["engine_sha256"][:4]), lambda: catalog.find(row["sha256"][:6]),
                 lambda: catalog.details(row["sha256"]), lambda: history(catalog, "model_1", include_all=True)):
        for sql, params in _statements(catalog, monkeypatch, call):
            plan = _plan(catalog, sql, params)
            assert not [line for line in plan if line.startswith("SCAN") and not line.startswith("SCAN d")], plan


def test_a_migrated_catalog_has_the_same_plans(tmp_path, monkeypatch):
    """A catalog written at schema 2 and opened by this version gets the indexes through its migration."""
    import sqlite3

    from pytest_trt.catalog.database import MIGRATIONS

    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + ";" + MIGRATIONS[1] + "; PRAGMA user_version = 2;")
    conn.close()
    with Catalog(db) as cat:
        f = Filters(**OPTIONS)
        for sql, params in _statements(cat, monkeypatch, lambda: query(cat, f)):
            assert not [line for line in _plan(cat, sql, params) if line.startswith("SCAN b")]
        for sql, params in _statements(cat, monkeypatch, lambda: query(cat, Filters())):
            assert _plan(cat, sql, params) == ["SCAN b USING INDEX bundles_current"]
    assert Path(db).exists()


def test_a_reader_maps_the_catalog_file(tmp_path: Path) -> None:
    """A query over many rows reads them in index order from pages all over the file: the read-only connection
    maps the file (the kernel's own list of this process's mappings names it) instead of copying page by page."""
    maps = Path("/proc/self/maps")
    if not maps.exists():
        pytest.skip("no /proc/self/maps on this system")
    with Catalog(tmp_path / "c.sqlite") as writer:  # closed: its rows are checkpointed into the file itself
        writer.add_entries(synthetic_entries(300))
    path = str((tmp_path / "c.sqlite").resolve())
    reader = Catalog(tmp_path / "c.sqlite", read_only=True)
    try:
        rows = query(reader, Filters(include_all=True))
        assert len(rows) == 300
        assert any(line.rstrip().endswith(" " + path) for line in maps.read_text().splitlines())
    finally:
        reader.close()
    assert not any(line.rstrip().endswith(" " + path) for line in maps.read_text().splitlines()), "unmapped on close"


def test_rows_read_a_repeated_column_name_as_sqlite_row_does(catalog: Catalog) -> None:
    """``Catalog.rows`` and ``Catalog.iter_rows`` give the dicts ``sqlite3.Row`` would: a name that two columns carry
    reads the first."""
    sql = "SELECT sha256 AS a, path AS a, created AS b, sha256 FROM bundles ORDER BY created, sha256 LIMIT 3"
    plain = sqlite3.connect(catalog.path)
    plain.row_factory = sqlite3.Row
    expected = [{k: r[k] for k in r.keys()} for r in plain.execute(sql)]
    plain.close()
    assert [list(r) for r in expected] == [["a", "b", "sha256"]] * 3
    assert catalog.rows(sql) == expected
    assert list(catalog.iter_rows(sql)) == expected


def _rewrites(paths: int, times: int) -> list[CatalogEntry]:
    """Each of ``paths`` bundle paths written ``times`` times, oldest first (a suite run night after night rewrites
    its bundles under the same names): ``paths`` current rows, the others superseded."""
    base = synthetic_entries(paths)
    out = []
    for t in range(times):
        for i, entry in enumerate(base):
            sha = hashlib.sha256(f"rewrite {t} of {i}".encode()).hexdigest()
            out.append(dataclasses.replace(entry, sha256=sha, path=f"/nightly/bundle-{i}.tar.gz",
                                           engine_sha256=hashlib.sha256(f"engine {i}".encode()).hexdigest(),
                                           created=f"2026-01-01T00:{t // 60:02d}:{t % 60:02d}Z"))
    return out


def vm_steps(cat: Catalog, call: Callable[[], Any]) -> tuple[int, Any]:
    """(SQLite virtual machine instructions that ``call`` ran on the catalog's connection, what it returned): the work
    grows with every row an index walk reads, also the rows a WHERE clause then drops."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    cat.conn.set_progress_handler(count, 1)
    try:
        result = call()
    finally:
        cat.conn.set_progress_handler(None, 1)
    return steps, result


def _vm_steps(cat: Catalog, f: Filters) -> tuple[int, int]:
    """(instructions, rows returned) of the query ``f``."""
    steps, rows = vm_steps(cat, lambda: query(cat, f))
    return steps, len(rows)


@pytest.mark.parametrize("history", ["superseded", "pruned"])
@pytest.mark.parametrize("f", [Filters(), Filters(since="2025-12-01T00:00:00Z")], ids=["no-filter", "since"])
def test_current_bundles_are_read_without_their_history(tmp_path: Path, f: Filters, history: str) -> None:
    """Years of nightly runs rewrite the same bundle paths, and retention prunes old bundles: a query of the current
    bundles reads those, not every superseded rewrite or pruned bundle before them.  Its work is compared with that of
    a catalog holding only the current rows."""
    entries = _rewrites(10, 60)
    with Catalog(tmp_path / "history.sqlite") as long, Catalog(tmp_path / "current.sqlite") as short:
        if history == "pruned":  # 600 paths, every bundle but the last 10 deleted by retention
            entries = [dataclasses.replace(e, path=f"/nightly/{e.sha256}.tar.gz") for e in entries]
            long.add_entries(entries)
            long.mark_pruned([e.sha256 for e in entries[:-10]], when="2026-06-01T00:00:00Z")
        else:
            long.add_entries(entries)
        short.add_entries(entries[-10:])
        assert long.count() == 600
        history_steps, history_rows = _vm_steps(long, f)
        current_steps, current_rows = _vm_steps(short, f)
    assert history_rows == current_rows == 10
    assert history_steps < 2 * current_steps, (history_steps, current_steps)
