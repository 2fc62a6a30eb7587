"""Atomic updates with real processes: kill -9 mid-update, concurrent writers."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt.errors import GoldenError
from pytest_trt.golden import atomic
from pytest_trt.golden.store import GoldenFile

WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from pytest_trt.golden import atomic, writers
    from pytest_trt.golden.dataset import GoldenDataset
    from pytest_trt.golden.provenance import Provenance

    path, value = sys.argv[1], float(sys.argv[2])
    prov = Provenance("onnxruntime", "1", "cpu", "c", "o", "d", "0", "2025-01-01T00:00:00Z")
    with atomic.update(path) as f:
        if "dataset" not in f:
            writers.write_dataset(f, GoldenDataset.from_arrays({"x": np.zeros((64, 4), np.float32)}))
        group, gen = writers.begin_snapshot(f, "tiny")
        out = writers.create_output(group, "logits", 64, (1024,), np.float32)
        out[...] = np.full((64, 1024), value, np.float32)
        writers.finish_snapshot(group, generation=gen, provenance=prov, baselines={}, record_json=None)
        writers.append_approval(f, {"reason": f"value {value}", "generation": gen})
""")


def run_writer(path: Path, value: float, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    environ = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **(env or {})}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(value)], env=environ,
                            stderr=subprocess.PIPE, text=True)


def test_kill_9_mid_update_leaves_previous_file_loadable(tmp_path: Path) -> None:
    path = tmp_path / "tiny.h5"
    assert run_writer(path, 1.0).wait(timeout=60) == 0
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = run_writer(path, 2.0, {atomic.PAUSE_ENV: "60"})
    assert proc.stderr is not None
    line = proc.stderr.readline()  # printed once the temp file is complete and fsynced
    assert "pausing" in line, line
    assert list(tmp_path.glob(".tiny.h5.tmp-*"))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    with GoldenFile(path) as g:
        assert g["tiny"].generation == 1
        assert float(g["tiny"].outputs["logits"][0, 0]) == 1.0
    # the next writer takes the (released) lock, removes the dead writer's temp file and succeeds
    assert run_writer(path, 3.0).wait(timeout=60) == 0
    assert not list(tmp_path.glob(".tiny.h5.tmp-*"))
    with GoldenFile(path) as g:
        assert g["tiny"].generation == 2 and [h.generation for h in g.history("tiny")] == [1]


def test_concurrent_writers_are_serialized(tmp_path: Path) -> None:
    path = tmp_path / "tiny.h5"
    procs = [run_writer(path, float(v)) for v in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with GoldenFile(path) as g:
        assert g["tiny"].generation == 4
        assert len(g.approvals()) == 4 and len(g.history("tiny")) == 3


def test_lock_timeout_names_the_lock(tmp_path: Path) -> None:
    from filelock import FileLock

    path = tmp_path / "tiny.h5"
    with FileLock(str(atomic.lock_path(path))):
        with pytest.raises(GoldenError, match=r"could not lock golden file .*tiny\.h5 within 0\.1 s: another process "
                           r"holds .*tiny\.h5\.lock; if none does \(a killed run\), delete that file and run again$"):
            with atomic.update(path, timeout=0.1):
                pass
