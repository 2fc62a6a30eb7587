"""The command-line entry points of the catalog, ``calib diff`` and ``log parse/diff``, fuzzed in-process.

Whatever the arguments and files, each command returns one of the CLI's exit codes (0, 1, 2, 3) or argparse
exits 2; it never raises, never prints a traceback, and a reading command never changes the catalog file.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_trt.cli import main
from tests.fuzz import fuzz_settings

CODES = {0, 1, 2, 3}
TEXT = st.text(max_size=40)
#: text made of what the arguments are built from: digits, hex, units, date parts, glob characters
ARGISH = st.text(alphabet="0123456789abcdefABCDEFxyz-+.:TZ smhdwy*?[]%_'\"\\\0\u00e9", max_size=30)
ARG = st.one_of(TEXT, ARGISH, st.integers().map(str), st.floats(allow_nan=True).map(str))


def run(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    text = out.getvalue()
    assert code in CODES, (args, code, text)
    assert "Traceback" not in text, text
    return code, text


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzzcli")


@pytest.fixture(scope="module")
def catalog(scratch: Path) -> Path:
    """An empty catalog at the current schema, as ``catalog add`` leaves it."""
    from pytest_trt.catalog.store import Catalog

    db = scratch / "catalog.sqlite"
    Catalog(db).close()
    return db


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- catalog ---------------------------------------------------------------------------------------------------

_QUERY_OPTIONS = st.sampled_from(["--config", "--backend", "--backend-version", "--device", "--calibration",
                                  "--verdict", "--engine-sha256", "--since", "--limit"])


@fuzz_settings
@given(st.lists(st.tuples(_QUERY_OPTIONS, ARG), max_size=4), st.booleans(), st.booleans())
def test_fuzz_catalog_query(catalog: Path, options: list[tuple[str, str]], include_all: bool, as_json: bool) -> None:
    before = _sha(catalog)
    args = ["catalog", "query", "--db", str(catalog)]
    for flag, value in options:
        args += [f"{flag}={value}"]
    args += ["--all"] * include_all + ["--json"] * as_json
    code, _ = run(args)
    assert code in (1, 2)  # an empty catalog matches nothing
    assert _sha(catalog) == before


@fuzz_settings
@given(st.sampled_from(["show", "history", "push"]), ARG, st.one_of(st.none(), ARG))
def test_fuzz_catalog_lookups(catalog: Path, command: str, value: str, since: str | None) -> None:
    before = _sha(catalog)
    args = ["catalog", command, "--db", str(catalog)]
    if command == "push":
        args += ["--uri", "http://127.0.0.1:9"]
    if command == "history" and since is not None:
        args += [f"--since={since}"]
    args += ["--", value]
    code, _ = run(args)
    assert code in (1, 2)
    assert _sha(catalog) == before


@fuzz_settings
@given(st.one_of(st.none(), ARG), st.one_of(st.none(), st.integers(-5, 5).map(str), ARG), st.booleans())
def test_fuzz_catalog_prune(catalog: Path, older: str | None, keep: str | None, dry_run: bool) -> None:
    args = ["catalog", "prune", "--db", str(catalog)]
    args += [f"--older-than={older}"] * (older is not None) + [f"--keep-last={keep}"] * (keep is not None)
    args += ["--dry-run"] * dry_run
    run(args)


@fuzz_settings
@given(st.one_of(st.binary(max_size=2000), st.sampled_from([b"SQLite format 3\0" + b"\0" * 84])),
       st.sampled_from([["query"], ["show", "abcd"], ["history", "cbr"], ["prune", "--keep-last", "1"],
                        ["push", "--uri", "http://127.0.0.1:9"]]))
def test_fuzz_catalog_file_bytes(scratch: Path, data: bytes, command: list[str]) -> None:
    db = scratch / "bytes.sqlite"
    db.write_bytes(data)
    for extra in ("-wal", "-shm", "-journal"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    code, _ = run(["catalog", command[0], "--db", str(db), *command[1:]])
    if command[0] in ("query", "show", "history"):
        assert code in (1, 3)
        assert db.read_bytes() == data


_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12).filter(
    lambda n: not n.startswith("sqlite_"))  # SQLite reserves those names


@fuzz_settings
@given(st.lists(_NAMES, min_size=1, max_size=4, unique=True), st.integers(0, 5),
       st.sampled_from(["query", "prune", "add"]))
def test_fuzz_foreign_databases_are_refused(scratch: Path, tables: list[str], version: int, command: str) -> None:
    from pytest_trt.catalog.database import CATALOG_TABLES

    db = scratch / "foreign.sqlite"
    for stale in (db, *(db.with_name(db.name + extra) for extra in ("-wal", "-shm", "-journal"))):
        stale.unlink(missing_ok=True)  # also what a catalog command left of the previous example
    conn = sqlite3.connect(db)
    for t in tables:
        conn.execute(f'CREATE TABLE "{t}" (x)')
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()
    before = _sha(db)
    args = {"query": ["query"], "prune": ["prune", "--keep-last", "1"], "add": ["add", str(scratch / "none")]}
    code, text = run(["catalog", args[command][0], "--db", str(db), *args[command][1:]])
    if set(tables) - CATALOG_TABLES or version == 0:  # refused: foreign, or (higher version) of a newer release
        assert code == 3 and ("not a pytest-trt catalog" in text or "is newer than this pytest-trt reads" in text)
        assert _sha(db) == before


# -- calib diff, log parse, log diff ---------------------------------------------------------------------------

_CACHE = st.one_of(st.binary(max_size=200), st.lists(
    st.builds("{}: {}".format, st.sampled_from(["x", "y", "logits"]), st.text("0123456789abcdef", max_size=9)),
    max_size=4).map(lambda lines: "\n".join(["TRT-8601-MinMaxCalibration", *lines]).encode()))


@fuzz_settings
@given(_CACHE, _CACHE, st.one_of(st.none(), ARG))
def test_fuzz_calib_diff(scratch: Path, old: bytes, new: bytes, rtol: str | None) -> None:
    a, b = scratch / "a.cache", scratch / "b.cache"
    a.write_bytes(old)
    b.write_bytes(new)
    code, _ = run(["calib", "diff", str(a), str(b), *([f"--rtol={rtol}"] if rtol is not None else [])])
    if old == new and code in (0, 1) and (rtol is None or float(rtol) >= 0):
        assert code == 0  # a cache is identical to itself, at any tolerance


_LOG = st.one_of(st.binary(max_size=300), st.text(max_size=200).map(str.encode),
                 st.lists(st.sampled_from(["[V] [TRT] Fusing conv1 with relu1", "[I] [TRT] Layer(Convolution): c",
                                           "[W] [TRT] warning", "[E] x", ""]), max_size=6).map(
                     lambda lines: "\n".join(lines).encode()))


@fuzz_settings
@given(_LOG, _LOG, st.one_of(st.none(), st.binary(max_size=60)), st.sampled_from(["parse", "diff"]))
def test_fuzz_log_commands(scratch: Path, old: bytes, new: bytes, onnx: bytes | None, command: str) -> None:
    a, b, model = scratch / "old.log", scratch / "new.log", scratch / "model.onnx"
    a.write_bytes(old)
    b.write_bytes(new)
    extra = []
    if onnx is not None:
        model.write_bytes(onnx)
        extra = ["--onnx", str(model)]
    logs = [str(a)] if command == "parse" else [str(a), str(b)]
    code, _ = run(["log", command, *logs, *extra])
    if command == "diff" and code in (0, 1):  # both logs passed log parse's checks
        assert run(["log", "parse", str(a), *extra])[0] == 0
        assert run(["log", "parse", str(b), *extra])[0] == 0
