"""``catalog query`` writes its rows as the cursor reads them: ``--json`` prints the bytes one ``json.dumps`` of the
whole document prints, while holding one row at a time, so a query over years of bundles needs no more memory than
one over a week of them."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from pytest_trt.catalog.query import Filters, jsonable, query
from pytest_trt.catalog.store import Catalog
from pytest_trt.cli import main
from tests.catalog.test_catalog_plans import synthetic_entries


def _catalog(path: Path, n: int) -> Path:
    with Catalog(path) as cat:
        cat.add_entries(synthetic_entries(n))
    return path


@pytest.mark.parametrize("args", [(), ("--config", "model_3"), ("--device", "L4", "--all"), ("--config", "none_such")],
                         ids=["all-current", "one-config", "with-history", "no-match"])
def test_json_output_is_one_dump_of_the_whole_document(tmp_path, capsys, args):
    db = _catalog(tmp_path / "c.sqlite", 60)
    capsys.readouterr()
    code = main(["catalog", "query", "--db", str(db), "--json", *args])
    out = capsys.readouterr().out
    filters = {(): Filters(), ("--config", "model_3"): Filters(config="model_3"),
               ("--device", "L4", "--all"): Filters(device="L4", include_all=True),
               ("--config", "none_such"): Filters(config="none_such")}[args]
    with Catalog(db, read_only=True) as cat:
        rows = jsonable(query(cat, filters))
    assert out == json.dumps({"db": str(db), "bundles": rows}, indent=2, sort_keys=True, default=str) + "\n"
    assert code == (0 if rows else 1) and (len(rows) > 1 or args == ("--config", "none_such"))
    if rows:  # nested values (the device's JSON) keep their indentation inside each row
        assert any(isinstance(r.get("device_detail"), dict) and r["device_detail"] for r in rows)


def test_table_output_counts_the_rows_it_read(tmp_path, capsys):
    db = _catalog(tmp_path / "c.sqlite", 30)
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(db), "--config", "model_1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    with Catalog(db, read_only=True) as cat:
        want = [r["path"] for r in query(cat, Filters(config="model_1"))]
    assert lines[0].startswith("created") and lines[-1] == f"{len(want)} bundles" and len(want) > 1
    assert [line.rsplit("  ", 1)[-1] for line in lines[1:-1]] == want
    assert main(["catalog", "query", "--db", str(db), "--config", "none_such"]) == 1
    assert capsys.readouterr().out == f"no bundle in {db} matches\n"


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def test_json_output_memory_does_not_grow_with_the_catalog(tmp_path, monkeypatch):
    peaks = {}
    for n in (400, 4000):
        db = _catalog(tmp_path / f"c{n}.sqlite", n)
        monkeypatch.setattr("sys.stdout", _Discard())
        tracemalloc.start()
        try:
            assert main(["catalog", "query", "--db", str(db), "--json", "--all"]) == 0
            peaks[n] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            monkeypatch.undo()
    # rows and their JSON held at once take ~10 KB a row here (4 MB for 400, 40 MB for 4,000); one row, far less
    assert peaks[4000] < peaks[400] + (1 << 20), peaks
