"""A bundle writer killed before its rename leaves ``.writing/.<bundle>.<pid>.<rand>.tmp``; the next write removes it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import needs_ort

pytestmark = needs_ort

SUITE = """
import pytest
from pytest_trt import BuildConfig

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r})

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.engine_sha256
"""

#: a plugin that SIGKILLs the session at the bundle's rename: the temporary file is complete, never renamed
KILLER = """
import os, signal
import pytest_trt.common.fileio as fileio

real = os.replace

class _Os:
    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def replace(src, dst):
        if str(dst).endswith(".tar.gz"):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(src, dst)

fileio.os = _Os()
"""


def test_a_killed_writers_temporary_bundle_is_removed_by_the_next_write(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makepyfile(killer=KILLER)
    args = ["-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend", "onnxruntime"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pytester.path), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "killer"], cwd=pytester.path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    folder = pytester.path / "trt-bundles"
    [left] = (folder / ".writing").glob(".cbr-v1.0-*.tar.gz.*.tmp")  # written in the staging folder
    pid = left.name.split(".tar.gz.")[1].split(".")[0]
    assert pid.isdigit() and not list(folder.glob("*.tar.gz")) and not list(folder.glob(".*.tmp"))

    # a live writer's temporary file is kept: this process is alive
    alive = left.with_name(left.name.replace(f".tar.gz.{pid}.", f".tar.gz.{os.getpid()}."))
    alive.write_bytes(b"being written")

    deadline = time.monotonic() + 30  # the killed pid is gone once its parent (subprocess.run) reaped it
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1)
    assert [p.name for p in (folder / ".writing").glob(".*.tmp")] == [alive.name]
    [bundle] = folder.glob("cbr-v1.0-*.tar.gz")
    assert bundle.stat().st_size > 0
    alive.unlink()


def test_write_atomic_names_its_temporary_file_with_its_pid(tmp_path):
    from pytest_trt.common.fileio import write_atomic

    seen = []

    def writer(fh: object) -> None:
        seen.extend(p.name for p in tmp_path.iterdir())

    write_atomic(tmp_path / "x.tar.gz", writer)  # type: ignore[arg-type]
    [name] = seen
    assert name.startswith(f".x.tar.gz.{os.getpid()}.") and name.endswith(".tmp")


@pytest.mark.parametrize("name", ["a.tar.gz", "a[1].tar.gz"])
def test_remove_dead_temporaries_keeps_other_files(tmp_path, name):
    from pytest_trt.common.fileio import remove_dead_temporaries

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(proc.stdout)
    files = {
        f".{name}.{dead}.abc123.tmp": False,  # a dead writer's: removed
        f".{name}.{os.getpid()}.abc123.tmp": True,  # this process's own
        f".{name}.abc123.tmp": True,  # no pid in the name
        f".other.tar.gz.{dead}.abc123.tmp": True,  # another file's
        name: True,
    }
    for f in files:
        (tmp_path / f).write_bytes(b"x")
    removed = remove_dead_temporaries(tmp_path / name)
    assert [p.name for p in removed] == [f".{name}.{dead}.abc123.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f for f, kept in files.items() if kept)
