"""Reading commands open the catalog read-only; nothing is written into another application's database.

``query``, ``show`` and ``history`` never write: another user with read access to a read-only catalog (0444
file, 0555 folder) gets the answer, and no ``-wal``/``-shm`` file appears.  Every command refuses a database
that is not a pytest-trt catalog, naming the file, and leaves its bytes as they were.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.catalog.database import MIGRATIONS
from pytest_trt.cli import EXIT_FILE, EXIT_USAGE, main
from tests.hardening import unprivileged


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _siblings(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name != db.name)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, ort_result: Any, write: Any) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("ro") / "trt-bundles"
    bundle = write(ort_result, folder)
    db = folder / "catalog.sqlite"
    assert main(["catalog", "add", str(folder), "--db", str(db)]) == 0
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every row in the main file, as after the last writer closed
    conn.close()
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    return {"db": db, "bundle": bundle, "sha": _sha(bundle)}


def _foreign(tmp_path: Path) -> Path:
    db = tmp_path / "app.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    return db


@pytest.mark.parametrize("command", [
    ["query"], ["query", "--config", "x"], ["show", "abcd"], ["history", "cbr"], ["prune", "--keep-last", "1"],
    ["push", "--uri", "http://127.0.0.1:9"], ["add", "NOBUNDLE"],
])
def test_a_foreign_database_is_refused_and_left_untouched(tmp_path, capsys, command):
    db = _foreign(tmp_path)
    before = _sha(db)
    capsys.readouterr()
    args = ["catalog", command[0], "--db", str(db), *command[1:]]
    if command[0] == "add":
        args[-1] = str(tmp_path)
    assert main(args) == EXIT_FILE
    err = capsys.readouterr().err
    assert err.strip() == (f"pytest-trt: {db}: not a pytest-trt catalog (it holds users, schema version 0); "
                           "nothing was written to it: give another --db path")
    assert _sha(db) == before
    assert _siblings(db) == []  # no -wal, -shm or journal left behind
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0


def test_tables_without_a_schema_version_are_not_a_catalog(tmp_path, capsys):
    db = tmp_path / "app.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE bundles (id INTEGER)")  # a name the catalog uses too
    conn.commit()
    conn.close()
    before = _sha(db)
    capsys.readouterr()
    assert main(["catalog", "add", str(tmp_path), "--db", str(db)]) == EXIT_FILE
    assert "not a pytest-trt catalog (it holds bundles, schema version 0)" in capsys.readouterr().err
    assert _sha(db) == before and _siblings(db) == []


def test_query_writes_nothing_into_the_catalog(catalog, capsys):
    db = catalog["db"]
    before = _sha(db)
    capsys.readouterr()
    assert main(["catalog", "show", catalog["sha"][:8], "--db", str(db)]) == 0
    assert f"bundle: {catalog['bundle']}" in capsys.readouterr().out
    assert _sha(db) == before


def test_an_older_catalog_is_read_after_a_writer_migrated_it(tmp_path, capsys, catalog):
    db = tmp_path / "catalog.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    conn.close()
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(db)]) == EXIT_FILE
    assert (capsys.readouterr().err.strip() ==
            f"pytest-trt: {db}: the catalog is at schema version 1 (this pytest-trt reads {len(MIGRATIONS)}); index "
            f"bundles or migrate it with 'pytest-trt catalog add trt-bundles --db {db}' (needs write access)")
    assert main(["catalog", "add", str(catalog["bundle"]), "--db", str(db)]) == 0
    assert main(["catalog", "query", "--db", str(db)]) == 0


READ = """
import sys
from pytest_trt.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _as_other_user(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root, to read the catalog as another user (uid 65534) than its owner")
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: cannot run as another user")
    env = {**os.environ, "PYTHONPATH": str(unprivileged.ROOT), "HOME": str(folder)}
    cmd = ["setpriv", f"--reuid={unprivileged.NOBODY}", f"--regid={unprivileged.NOBODY}", "--clear-groups",
           sys.executable, "-c", READ, *args]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("folder_mode", [0o555, 0o777])
def test_another_user_queries_a_read_only_catalog(catalog, folder_mode):
    shared = unprivileged.world_dir()
    try:
        db = shared / "cat" / "catalog.sqlite"
        db.parent.mkdir()
        shutil.copyfile(catalog["db"], db)
        db.chmod(0o444)
        db.parent.chmod(folder_mode)
        before = _sha(db)
        for args in (["catalog", "query", "--json"], ["catalog", "show", catalog["sha"][:12]],
                     ["catalog", "history", "cbr"]):
            out = _as_other_user(shared, *args, "--db", str(db))
            assert out.returncode == 0, out.stdout + out.stderr
            assert str(catalog["bundle"]) in out.stdout
            if "--json" in args:
                assert [b["sha256"] for b in json.loads(out.stdout)["bundles"]] == [catalog["sha"]]
        assert _sha(db) == before
        assert _siblings(db) == []  # neither -wal nor -shm: nothing of the other user's is left in the folder
        bundle = shared / catalog["bundle"].name
        shutil.copyfile(catalog["bundle"], bundle)
        bundle.chmod(0o644)
        out = _as_other_user(shared, "catalog", "add", str(bundle), "--db", str(db))
        assert out.returncode == EXIT_FILE and "Traceback" not in out.stderr
        assert f"{db}: the catalog is read-only for this user" in out.stderr
        assert _sha(db) == before
    finally:
        db.parent.chmod(0o755)
        shutil.rmtree(shared, ignore_errors=True)


READER_OWNS = "the reader owns the catalog file, in a folder it cannot write"
CRASHED = "a crashed writer left its -wal and -shm, in a folder the reader cannot write"


@pytest.mark.parametrize("case", [READER_OWNS, CRASHED])
def test_a_catalog_in_a_folder_the_reader_cannot_write(catalog, tmp_path, case):
    shared = unprivileged.world_dir()
    folder = shared / "cat"
    try:
        folder.mkdir()
        db = folder / "catalog.sqlite"
        if case == CRASHED:  # rows only in the WAL: an immutable read would miss them
            code = ("import os, sys\nfrom pytest_trt.catalog.store import Catalog\n"
                    "c = Catalog(sys.argv[1])\nc.conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
                    "c.add_paths([sys.argv[2]])\nos._exit(0)\n")
            subprocess.run([sys.executable, "-c", code, str(db), str(catalog["bundle"])], check=True, timeout=120)
            assert db.with_name(db.name + "-wal").stat().st_size > 0
            for p in folder.iterdir():
                p.chmod(0o444)
        else:
            shutil.copyfile(catalog["db"], db)
            if os.geteuid() == 0:
                os.chown(db, unprivileged.NOBODY, unprivileged.NOBODY)
            db.chmod(0o644)
        before = sorted(p.name for p in folder.iterdir())
        folder.chmod(0o555)
        out = _as_other_user(shared, "catalog", "query", "--json", "--db", str(db))
        assert out.returncode == 0, out.stdout + out.stderr
        assert [b["sha256"] for b in json.loads(out.stdout)["bundles"]] == [catalog["sha"]]
        assert sorted(p.name for p in folder.iterdir()) == before
    finally:
        folder.chmod(0o755)
        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("since", ["99999999999y", "9999y", "1" * 400 + "d", "0001-01-01T00:00:00+05:00"])
@pytest.mark.parametrize("command", [["query"], ["history", "cbr"]])
def test_since_out_of_range_is_a_usage_error(catalog, capsys, since, command):
    capsys.readouterr()
    assert main(["catalog", *command, "--db", str(catalog["db"]), "--since", since]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("pytest-trt catalog: --since") and "Traceback" not in err


def test_older_than_out_of_range_is_a_usage_error(catalog, capsys):
    capsys.readouterr()
    assert main(["catalog", "prune", "--db", str(catalog["db"]), "--older-than", "99999999999y"]) == EXIT_USAGE
    assert "--older-than: duration '99999999999y' is longer than 2000 years" in capsys.readouterr().err


@pytest.mark.parametrize("sha", ["", "zz", "abc", "a" * 65, "12 4"])
@pytest.mark.parametrize("command", ["show", "push"])
def test_a_sha_that_is_not_a_hex_prefix_is_refused(catalog, capsys, sha, command):
    extra = ["--uri", "http://127.0.0.1:9"] if command == "push" else []
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["catalog", command, sha, "--db", str(catalog["db"]), *extra])
    assert exc.value.code == EXIT_USAGE
    assert f"argument SHA: {sha!r} is not a sha256 prefix: give 4 to 64 hexadecimal digits" in capsys.readouterr().err


def test_a_bundle_this_user_cannot_reach_is_an_error_line(catalog, tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    shutil.copyfile(catalog["bundle"], private / "b.tar.gz")
    world = unprivileged.world_dir()
    try:
        out = _as_other_user(world, "catalog", "add", str(private / "b.tar.gz"), "--db", str(world / "c.sqlite"))
        assert out.returncode == EXIT_FILE and "Traceback" not in out.stderr, out.stderr
        assert f"ERROR   {private / 'b.tar.gz'}: [Errno 13] Permission denied" in out.stdout
    finally:
        shutil.rmtree(world, ignore_errors=True)


def test_a_four_digit_prefix_shows_exactly_its_bundle(catalog, capsys):
    capsys.readouterr()
    assert main(["catalog", "show", catalog["sha"][:4].upper(), "--db", str(catalog["db"]), "--json"]) == 0
    assert [b["sha256"] for b in json.loads(capsys.readouterr().out)["bundles"]] == [catalog["sha"]]


@pytest.mark.parametrize("limit", ["0", "-5", "9223372036854775808", "1.5", "x"])
def test_a_limit_that_is_not_a_row_count_is_refused(catalog, capsys, limit):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["catalog", "query", "--db", str(catalog["db"]), f"--limit={limit}"])
    assert exc.value.code == EXIT_USAGE
    assert f"argument --limit: {limit!r} is not a number of rows: give a whole number of 1 or more" in \
        capsys.readouterr().err


def test_the_largest_limit_is_accepted(catalog, capsys):
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(catalog["db"]), f"--limit={2**63 - 1}", "--json"]) == 0
    assert [b["sha256"] for b in json.loads(capsys.readouterr().out)["bundles"]] == [catalog["sha"]]


def test_a_catalog_older_only_by_its_indexes_is_read_as_it_is(tmp_path, capsys, catalog):
    """Schema 5 only adds indexes: a reader without write access to a shared schema-4 catalog still queries it (the
    same rows, the file untouched), and the first writer migrates it."""
    db = tmp_path / "catalog.sqlite"
    shutil.copy(catalog["db"], db)
    conn = sqlite3.connect(db)
    conn.executescript("DROP INDEX bundles_current; DROP INDEX bundles_current_path; PRAGMA user_version = 4;")
    conn.close()
    before = _sha(db)
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["bundles"]
    assert [r["sha256"] for r in rows] == [catalog["sha"]]
    assert _sha(db) == before
    assert main(["catalog", "add", str(catalog["bundle"]), "--db", str(db)]) == 0
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert {"bundles_current", "bundles_current_path"} <= {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    conn.close()
