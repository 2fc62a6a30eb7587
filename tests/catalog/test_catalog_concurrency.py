"""Eight processes indexing overlapping bundles into one fresh catalog: no lost and no duplicate rows."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.catalog.conftest import verdict

WRITERS = 8
BUNDLES = 24


def test_eight_concurrent_writers(tmp_path, rtx_result, write):
    paths = [write(rtx_result, tmp_path / "b", name=f"mnv2-{i:02d}.tar.gz",
                   golden={f"t.py::test_{i}": verdict(rtx_result, "pass", l2_delta=i / 100)}) for i in range(BUNDLES)]
    db = tmp_path / "catalog.sqlite"
    script = Path(__file__).with_name("writer.py")
    procs = [subprocess.Popen([sys.executable, str(script), str(db), str(seed), *map(str, paths)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed in range(WRITERS)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * WRITERS, [err for _, err in outputs]
    statuses = [s for out, _ in outputs for s in out.split()]
    assert len(statuses) == WRITERS * BUNDLES
    assert statuses.count("added") == BUNDLES  # each bundle added by exactly one writer
    assert statuses.count("known") == (WRITERS - 1) * BUNDLES
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT sha256 FROM bundles").fetchall()
    expected = {hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    assert sorted(r[0] for r in rows) == sorted(expected)
    assert conn.execute("SELECT count(*), count(DISTINCT bundle_sha256) FROM verdicts").fetchone() == (BUNDLES,
                                                                                                       BUNDLES)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
