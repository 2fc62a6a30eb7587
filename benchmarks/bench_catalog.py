"""Catalog indexing and query speed (run by hand).

    python benchmarks/bench_catalog.py [--bundles 300] [--sizes 10000,100000] [--runs 5]

1. Index N bundles of a small real engine (conv_bn_relu built by TensorRT-RTX,
   or ONNX Runtime where RTX is missing) with ``Catalog.add_paths(folder)``,
   the path ``pytest-trt catalog add DIR`` takes.  Side by side: verifying the
   same bundles alone (``verify_bundle``); the same folder again, every bundle
   known and unchanged (target < 5 % of the first add); then one bundle touched
   (exactly 1 verified).
2. Queries over catalogs of each size, filled through ``add_entries`` with
   realistic mixes (lineages, two verdicts per bundle, approvals, calibrators,
   devices): each ``catalog query`` option alone, the combo (8.6.* on A100,
   minmax, regression) and config+verdict, median of ``--runs``, alternating
   the catalogs.  Prints rows matched (> 0), the growth from the smallest to
   the largest catalog (target <= the size ratio), microseconds per returned
   row, and the combo vs 100 ms.  Beside each, in the same run, the floor of
   returning as many rows: plain ``sqlite3`` reading that many rows of
   ``bundles`` into dicts, no filter, in table order and in ``created`` order
   (the order a query returns), and the query's growth over that floor's.
3. ``pytest-trt catalog query`` as a user runs it: each query shape above with ``--json``, and the table without
   a filter, a fresh process per run, output to /dev/null; the command's time, its growth (target <= the size
   ratio) and the process's peak RSS (rows are written out as they are read; the catalog file's mapped pages count).
4. Catalogs of nightly rewrites (the same bundle paths written every night,
   1 current row in 100): the query of the current bundles without a filter
   and with ``--since``, against the same catalog without the index of the
   current rows (``bundles_current``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.models import write_all  # noqa: E402
from pytest_trt.audit.bundle import write_bundle  # noqa: E402
from pytest_trt.audit.environment import capture_environment  # noqa: E402
from pytest_trt.audit.verify import verify_bundle  # noqa: E402
from pytest_trt.catalog.fields import ApprovalRef, CatalogEntry, Verdict  # noqa: E402
from pytest_trt.catalog.query import Filters, query  # noqa: E402
from pytest_trt.catalog.store import Catalog, verify_entry  # noqa: E402
from pytest_trt.config import BuildConfig, Profile  # noqa: E402


def small_build(folder: Path):  # type: ignore[no-untyped-def]
    onnx = write_all(folder)["conv_bn_relu"]
    config = BuildConfig(name="cbr", version="1.0", onnx=onnx,
                         profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])
    try:
        from pytest_trt.backends.tensorrt import TensorRTBackend

        return TensorRTBackend(module="tensorrt_rtx").build_config(config), None
    except Exception as exc:  # noqa: BLE001 - fall back to ONNX Runtime where RTX is missing
        from pytest_trt.backends.onnxruntime import OrtBackend

        return OrtBackend().build_config(config), exc


def write_bundles(result, folder: Path, n: int) -> list[Path]:  # type: ignore[no-untyped-def]
    from pytest_trt.buildlog.readers import parse_entries

    record = parse_entries(result.log) if result.backend != "onnxruntime" else None
    env = capture_environment(backend=result.backend, rootdir=None)
    paths = []
    for i in range(n):
        golden = {f"tests/test_m.py::test_{i}": {"config_hash": result.config_hash, "verdict": "pass",
                                                  "l2_delta": i / n}}
        paths.append(write_bundle(result, folder, record=record, environment=env, golden_results=golden,
                                  name=f"cbr-{i:05d}.tar.gz").path)
    return paths


def bench_index(paths: list[Path], db: Path) -> None:
    t0 = time.perf_counter()
    for p in paths:
        verify_bundle(p)
    verify_s = time.perf_counter() - t0
    with Catalog(db) as cat:
        t0 = time.perf_counter()
        results = cat.add_paths([paths[0].parent])
        index_s = time.perf_counter() - t0
        assert sum(r.status == "added" for r in results) == len(paths), "not every bundle was added"
        t0 = time.perf_counter()
        again = cat.add_paths([paths[0].parent])
        reindex_s = time.perf_counter() - t0
        assert all(r.status == "known" for r in again)
        st = os.stat(paths[0])
        os.utime(paths[0], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # one bundle changed (touched)
        import pytest_trt.audit.verify as verify

        calls: list[Path] = []
        real = verify.verify_bundle
        verify.verify_bundle = lambda p, **kw: calls.append(p) or real(p, **kw)  # type: ignore[assignment]
        try:
            t0 = time.perf_counter()
            cat.add_paths([paths[0].parent])
            changed_s = time.perf_counter() - t0
        finally:
            verify.verify_bundle = real  # type: ignore[assignment]
    n = len(paths)
    print(f"index {n} bundles (catalog add DIR): {index_s:.2f} s ({index_s / n * 1000:.1f} ms/bundle); "
          f"target < 30 s for 1,000 -> {'OK' if index_s * 1000 / n < 30 else 'MISSED'}")
    print(f"  verify_bundle alone, same bundles: {verify_s:.2f} s; ratio index/verify {index_s / verify_s:.2f}")
    share = reindex_s / index_s * 100
    print(f"  again (all known, unchanged): {reindex_s * 1000:.1f} ms = {share:.2f} % of the first add "
          f"(target < 5 %) -> {'OK' if share < 5 else 'MISSED'}")
    print(f"  1 bundle changed: {len(calls)} verified, {changed_s * 1000:.1f} ms "
          f"-> {'OK' if len(calls) == 1 else 'MISSED'}")


DEVICES = {"NVIDIA A100-SXM4-80GB": "8.0", "NVIDIA H100 80GB HBM3": "9.0", "NVIDIA L4": "8.9", "cpu-aot": None}


def fill(db: Path, base: CatalogEntry, rows: int, seed: int = 0) -> None:
    """``rows`` catalog rows through ``add_entries``: 5 backend versions, 4 devices (real ``build.device``
    dicts), calibration minmax/entropy2/none/none, 2 tests per bundle with verdicts pass 8 : fail 1 : updated 1
    (+10 % fail on the second), approvals on ``updated``, and 20 % of rows rewriting an earlier path (lineages)."""
    rng = random.Random(seed)
    lineages: list[tuple[str, str]] = []
    entries = []
    for i in range(rows):
        sha = hashlib.sha256(f"row {i}".encode()).hexdigest()
        backend, version = rng.choice([("tensorrt", "8.5.3.1"), ("tensorrt", "8.6.1.6"), ("tensorrt", "10.3.0.26"),
                                       ("tensorrt-rtx", "1.7.1.116"), ("onnxruntime", "1.23.2")])
        verdict = rng.choice(["pass"] * 8 + ["fail", "updated"])
        device = rng.choice(list(DEVICES))
        if lineages and rng.random() < 0.2:
            path, engine = rng.choice(lineages)
        else:
            path, engine = f"/archive/{sha[:2]}/{sha}.tar.gz", hashlib.sha256(sha.encode()).hexdigest()
            lineages.append((path, engine))
        detail = ({"kind": "cpu-aot"} if DEVICES[device] is None else
                  {"kind": "gpu", "name": device, "compute_capability": DEVICES[device]})
        entries.append(dataclasses.replace(
            base, sha256=sha, path=path, config_name=f"model_{rng.randrange(50)}",
            config_version=f"{rng.randrange(5)}.{rng.randrange(10)}", backend=backend, backend_version=version,
            device=device, device_json=json.dumps(detail, sort_keys=True, separators=(",", ":")), engine_sha256=engine,
            calibration_algorithm=rng.choice(["minmax", "entropy2", None, None]),
            created=f"20{rng.randrange(20, 27)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
                    f"T00:00:{i % 60:02d}Z",
            verdicts=(Verdict("tests/test_m.py::test_acc", verdict, "goldens/m.h5", 1, None, {"l2_delta": 0.1}),
                      Verdict("tests/test_m.py::test_tag", rng.choice(["pass"] * 9 + ["fail"]), "goldens/m.h5", 1,
                              None, {"l2_delta": 0.1})),
            approvals=(ApprovalRef("tests/test_m.py::test_acc", "goldens/m.h5", 1, "ann", "ok"),)
            if verdict == "updated" else ()))
    with Catalog(db) as cat:
        for start in range(0, len(entries), 2000):
            cat.add_entries(entries[start:start + 2000])
        assert cat.count() == rows, cat.count()


FILTERS = {
    "none": Filters(),
    "config": Filters(config="model_1*"),
    "backend": Filters(backend="tensorrt"),
    "backend_version": Filters(backend_version="8.6"),
    "device": Filters(device="A100"),
    "calibration": Filters(calibration="min-max"),
    "verdict": Filters(verdict="regression"),
    "engine_sha256": Filters(engine_sha256="ab"),
    "since": Filters(since="2026-06-01T00:00:00Z"),
    "combo": Filters(backend_version="8.6.*", device="A100", calibration="minmax", verdict="regression"),
    "config+verdict": Filters(config="model_1", verdict="regression"),
}


def floor_rows(conn: sqlite3.Connection, columns: str, k: int, *, ordered: bool) -> int:
    """The floor of a query returning ``k`` rows: plain ``sqlite3`` (none of pytest-trt's code) reading the first
    ``k`` rows of ``bundles`` with the columns ``catalog query`` returns into dicts, with no filter: in the table's
    order (``ordered=False``: sequential pages) or in ``created`` order through its index, the order a query returns
    (each row on another page).  Rows read."""
    order = " ORDER BY b.created, b.sha256" if ordered else ""
    cur = conn.execute(f"SELECT {columns} FROM bundles b{order} LIMIT ?", (k,))
    names = [d[0] for d in cur.description]
    return len([dict(zip(names, row, strict=True)) for row in cur])


def floor_connection(db: Path) -> sqlite3.Connection:
    """A plain read-only connection to ``db`` that maps the file, as the catalog's reader does."""
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    conn.execute("PRAGMA mmap_size = 1073741824")
    return conn


def bench_query(dbs: dict[int, Path], runs: int) -> None:
    """Each filter alone, the combo and config+verdict on every catalog size, alternating the catalogs; then the
    floors of returning as many rows (:func:`floor_rows`), alternating the same way."""
    cats = {n: Catalog(db, read_only=True) for n, db in dbs.items()}
    times: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    found: dict[tuple[str, int], int] = {}
    for _ in range(runs):
        for name, f in FILTERS.items():
            for n, cat in cats.items():
                t0, c0 = time.perf_counter(), time.process_time()
                found[name, n] = len(query(cat, f))
                times.setdefault((name, n), []).append(time.perf_counter() - t0)
                cpu.setdefault((name, n), []).append(time.process_time() - c0)
    columns = next(iter(cats.values())).public_columns("b") + \
        ", b.lineage_verdicts AS verdicts, b.lineage_approvals AS approvals"
    for cat in cats.values():
        cat.close()
    floors: dict[tuple[str, int, bool], list[float]] = {}
    plain = {n: floor_connection(db) for n, db in dbs.items()}
    for _ in range(runs):
        for name in FILTERS:
            for n, conn in plain.items():
                for ordered in (False, True):
                    t0 = time.perf_counter()
                    got = floor_rows(conn, columns, found[name, n], ordered=ordered)
                    floors.setdefault((name, n, ordered), []).append(time.perf_counter() - t0)
                    assert got == found[name, n], (name, n, got)
    for conn in plain.values():
        conn.close()
    sizes = sorted(dbs)
    small, large = sizes[0], sizes[-1]
    print(f"queries, median of {runs} (load {os.getloadavg()[0]:.1f}); growth = time({large:,}) / time({small:,}), "
          f"target <= {large / small:.0f}x")
    print(f"  {'filter':16s} " + " ".join(f"{f'rows@{n:,}':>12s} {f'ms@{n:,}':>11s}" for n in sizes)
          + f" {'growth':>7s} {'us/row':>7s}")
    print("  (CPU growth: the same from the process's CPU time, which other processes' load disturbs less)")
    summary: list[float] = []
    for name in FILTERS:
        med = {n: statistics.median(times[name, n]) for n in sizes}
        assert found[name, large] > 0, f"{name} matched no rows: the bench proves nothing"
        growth = med[large] / med[small]
        per_row = (med[large] / found[name, large]) / (med[small] / max(1, found[name, small]))
        cpu_growth = statistics.median(cpu[name, large]) / max(1e-9, statistics.median(cpu[name, small]))
        mark = "OK" if growth <= large / small else "MISSED"
        floor_growth = {o: statistics.median(floors[name, large, o]) / statistics.median(floors[name, small, o])
                        for o in (False, True)}
        beyond = growth / floor_growth[True]
        print(f"  {name:16s} " + " ".join(f"{found[name, n]:12,d} {med[n] * 1000:11.1f}" for n in sizes)
              + f" {growth:6.1f}x {med[large] / found[name, large] * 1e6:7.1f}  {mark} "
              f"(per returned row {per_row:.2f}x; rows {found[name, large] / max(1, found[name, small]):.1f}x; "
              f"CPU growth {cpu_growth:.1f}x)")
        floor_ms = statistics.median(floors[name, large, True]) * 1000
        print(f"  {'':16s} floor, as many rows into dicts by plain sqlite3: growth {floor_growth[False]:.1f}x in "
              f"table order, {floor_growth[True]:.1f}x in created order ({floor_ms:.1f} ms at {large:,}: the query "
              f"takes {med[large] * 1000 / floor_ms:.2f}x); query growth / the latter "
              f"{beyond:.2f} (<= 1.00: nothing grows beyond returning the rows) "
              f"{'OK' if beyond <= 1.0 else 'MISSED'}")
        summary.append(beyond)
    print(f"  query growth / its floor's growth, {len(summary)} shapes: {min(summary):.2f}-{max(summary):.2f}; "
          f"{sum(b <= 1.0 for b in summary)} of {len(summary)} <= 1.00")
    combo = statistics.median(times["combo", large]) * 1000
    print(f"combo filter (8.6.* on A100, minmax, regression) over {large:,} rows: {found['combo', large]} rows in "
          f"{combo:.1f} ms; target < 100 ms -> {'OK' if combo < 100 else 'MISSED'}")


# the peak from /proc (VmHWM, this process's memory since exec): ru_maxrss would carry the forking parent's
COMMAND_SCRIPT = """
import os, sys, time
from pytest_trt.cli import main
sys.stdout = open(os.devnull, "w")
t0 = time.perf_counter()
code = main(["catalog", "query", "--db", *sys.argv[1:]])
seconds = time.perf_counter() - t0
sys.stdout = sys.__stdout__
peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(seconds, peak, code)
"""


def cli_args(f: Filters) -> list[str]:
    """The ``catalog query`` options that make the filters ``f``."""
    args = []
    for field in dataclasses.fields(f):
        value = getattr(f, field.name)
        if field.name in ("include_all", "limit") or value is None:
            continue
        args += [f"--{field.name.replace('_', '-')}", str(value)]
    return args + (["--all"] if f.include_all else [])


def bench_command(dbs: dict[int, Path], runs: int) -> None:
    """``pytest-trt catalog query`` as a user runs it: each shape of :data:`FILTERS` with ``--json``, and the table
    without a filter, each run in a fresh process with its output to /dev/null; the command's time (from its call:
    the interpreter's start and the import of ``pytest_trt.cli`` excluded, the modules the command loads included)
    and the process's peak RSS (the catalog file is mapped: its pages read count in it), per size."""
    root = Path(__file__).resolve().parents[1]
    sizes = sorted(dbs)
    # the command takes 4 or more digits of an engine sha256 (1 row in 65,536): the 2-digit shape is the library's
    shapes = [(name, [*cli_args(f), "--json"]) for name, f in FILTERS.items() if name != "engine_sha256"]
    shapes.append(("none, table", []))
    seconds: dict[tuple[str, int], list[float]] = {}
    peak: dict[tuple[str, int], list[int]] = {}
    for _ in range(runs):
        for name, args in shapes:
            for n in sizes:
                out = subprocess.run([sys.executable, "-c", COMMAND_SCRIPT, str(dbs[n]), *args], cwd=root,
                                     capture_output=True, text=True, check=True).stdout.split()
                assert out[2] == "0", (name, n, out)  # every shape matches rows
                seconds.setdefault((name, n), []).append(float(out[0]))
                peak.setdefault((name, n), []).append(int(out[1]))
    small, large = sizes[0], sizes[-1]
    print(f"catalog query, the command in a fresh process (--json unless named), output to /dev/null, median of "
          f"{runs} (load {os.getloadavg()[0]:.1f}); growth target <= {large / small:.0f}x:")
    within = 0
    for name, _ in shapes:
        med = {n: statistics.median(seconds[name, n]) for n in sizes}
        rss = {n: statistics.median(peak[name, n]) / 1024 for n in sizes}
        growth = med[large] / med[small]
        within += growth <= large / small
        cells = "  ".join(f"{n:,} rows: {med[n] * 1000:7.1f} ms, peak {rss[n]:4.0f} MiB" for n in sizes)
        print(f"  {name:16s} {cells}   growth {growth:5.1f}x {'OK' if growth <= large / small else 'MISSED'}")
    print(f"  {within} of {len(shapes)} command shapes within {large / small:.0f}x (engine_sha256 left out: the "
          "command takes 4 or more digits, which match 0-2 rows here)")


NIGHTS = 100


def fill_nightly(db: Path, base: CatalogEntry, rows: int) -> tuple[int, float, float]:
    """``rows`` rows through ``add_entries`` as a suite run night after night leaves them: ``rows / NIGHTS`` bundle
    paths (engines unchanged: cache hits), each rewritten every night with new verdicts; the last night's rows are
    current, every earlier one superseded.  (current rows, ms per row added on the first night, on the last)."""
    paths = rows // NIGHTS
    per_row: list[float] = []
    for night in range(NIGHTS):
        day = f"20{20 + night // 336:02d}-{1 + night // 28 % 12:02d}-{1 + night % 28:02d}T02:00:00Z"
        batch = [dataclasses.replace(
            base, sha256=hashlib.sha256(f"night {night} bundle {i}".encode()).hexdigest(),
            path=f"/ci/trt-bundles/model_{i}.tar.gz", config_name=f"model_{i}",
            engine_sha256=hashlib.sha256(f"engine {i}".encode()).hexdigest(), created=day,
            verdicts=(Verdict("tests/test_m.py::test_acc", "fail" if (night + i) % 50 == 0 else "pass",
                              "goldens/m.h5", 1, None, {"l2_delta": 0.1}),)) for i in range(paths)]
        with Catalog(db) as cat:  # opened and closed (its WAL checkpointed) each night, as each night's session does
            t0 = time.perf_counter()
            cat.add_entries(batch)
            per_row.append((time.perf_counter() - t0) / paths * 1000)
    return paths, per_row[0], per_row[-1]


def bench_history(dbs: dict[int, Path], runs: int) -> None:
    """The current bundles of catalogs that are mostly superseded rewrites: the query without a filter and with
    ``--since``, on each catalog and on a copy of it without the index of current rows (``bundles_current``),
    alternating; medians."""
    plain: dict[int, Path] = {}
    for n, db in dbs.items():
        plain[n] = db.with_name(db.stem + "-no-current-index.sqlite")
        with Catalog(db) as cat:  # closed: its WAL is checkpointed into the file, which is then copied
            cat.count()
        plain[n].write_bytes(db.read_bytes())
        conn = sqlite3.connect(plain[n])
        conn.execute("DROP INDEX bundles_current")
        conn.commit()
        conn.close()
    shapes = {"none": Filters(), "since": Filters(since="2020-02-01T00:00:00Z")}
    cats = {(n, side): Catalog(path, read_only=True) for n in dbs for side, path in (("index", dbs[n]),
                                                                                     ("no index", plain[n]))}
    times: dict[tuple[str, int, str], list[float]] = {}
    found: dict[tuple[str, int, str], int] = {}
    for _ in range(runs):
        for name, f in shapes.items():
            for (n, side), cat in cats.items():
                t0 = time.perf_counter()
                found[name, n, side] = len(query(cat, f))
                times.setdefault((name, n, side), []).append(time.perf_counter() - t0)
    for cat in cats.values():
        cat.close()
    print(f"nightly rewrites ({NIGHTS} nights, 1 current row in {NIGHTS}), median of {runs} "
          f"(load {os.getloadavg()[0]:.1f}):")
    for name in shapes:
        for n in sorted(dbs):
            with_index = statistics.median(times[name, n, "index"])
            without = statistics.median(times[name, n, "no index"])
            assert found[name, n, "index"] == found[name, n, "no index"] > 0, (name, n)
            print(f"  {name:6s} {n:>9,} rows: {found[name, n, 'index']:6,} current in {with_index * 1000:7.1f} ms; "
                  f"without bundles_current {without * 1000:7.1f} ms ({without / with_index:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundles", type=int, default=300)
    ap.add_argument("--sizes", default="10000,100000", help="catalog sizes for the queries (rows)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result, why = small_build(folder / "models")
        engine_kb = len(result.engine) / 1024
        print(f"engine: conv_bn_relu by {result.backend} ({engine_kb:.0f} KiB)"
              + (f" (TensorRT-RTX unavailable: {why})" if why else ""))
        t0 = time.perf_counter()
        paths = write_bundles(result, folder / "trt-bundles", args.bundles)
        size = sum(p.stat().st_size for p in paths) / len(paths) / 1024
        print(f"wrote {len(paths)} bundles ({size:.0f} KiB each) in {time.perf_counter() - t0:.1f} s (not timed below)")
        bench_index(paths, folder / "catalog.sqlite")
        base = verify_entry(paths[0])
        assert isinstance(base, CatalogEntry)
        dbs = {}
        for n in sorted(int(x) for x in args.sizes.split(",")):
            t0 = time.perf_counter()
            dbs[n] = folder / f"rows{n}.sqlite"
            fill(dbs[n], base, n)
            print(f"filled {n:,} rows through add_entries in {time.perf_counter() - t0:.1f} s (not timed below)")
        bench_query(dbs, args.runs)
        bench_command(dbs, args.runs)
        history = {}
        for n in sorted(dbs):
            t0 = time.perf_counter()
            history[n] = folder / f"nightly{n}.sqlite"
            current, first, last = fill_nightly(history[n], base, n)
            print(f"filled {n:,} rows of nightly rewrites ({current:,} current) through add_entries in "
                  f"{time.perf_counter() - t0:.1f} s; a row added on the first night {first:.2f} ms, on night "
                  f"{NIGHTS} {last:.2f} ms")
        bench_history(history, args.runs)


if __name__ == "__main__":
    main()
