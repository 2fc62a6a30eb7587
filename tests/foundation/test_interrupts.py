"""An interrupted test run leaves nothing running: SIGTERM to pytest, or Ctrl-C (SIGINT to its process group), stops
the server a session fixture started (in a process group of its own, as the MLflow and Prometheus fixtures do), a
plain child process a test started, the pytest-xdist workers and pytest itself.

Each process writes its own pid to a file; the test reads them and checks ``/proc`` itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
import os, subprocess, sys, time
from pathlib import Path
import pytest
from tests.interrupts import spawn, stop

HERE = Path(__file__).parent

def pytest_configure(config):
    if hasattr(config, "workerinput"):
        (HERE / f"worker-{os.getpid()}").write_text("")

@pytest.fixture(scope="session")
def server():
    proc = spawn([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    (HERE / f"server-{proc.pid}").write_text("")
    try:
        yield proc
    finally:
        stop(proc)
"""

TESTS = """
import subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).parent

def test_a(server):
    time.sleep(300)

def test_b(server):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    (HERE / f"child-{child.pid}").write_text("")
    time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(("how", "xdist"), [("SIGTERM", True), ("SIGINT", True), ("SIGTERM", False)],
                         ids=["sigterm-xdist", "ctrl-c-xdist", "sigterm-serial"])
def test_an_interrupted_run_leaves_nothing_running(tmp_path: Path, how: str, xdist: bool) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_wait.py").write_text(TESTS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = ["-n", "2"] if xdist else ["-p", "no:xdist", "-k", "test_b"]  # both tests busy at once: one per worker
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.interrupts", *args],
                           cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        want = {"server", "child", *(("worker",) if xdist else ())}
        deadline = time.monotonic() + 180
        while {p.name.split("-")[0] for p in tmp_path.iterdir() if "-" in p.name} != want:
            if run.poll() is not None or time.monotonic() > deadline:
                os.killpg(run.pid, signal.SIGKILL)
                pytest.fail(f"the run did not start its processes: {run.communicate()[0][-3000:]}")
            time.sleep(0.2)
        time.sleep(0.5)  # the child's test is sleeping now
        pids = {p.name: int(p.name.split("-")[1]) for p in tmp_path.iterdir() if p.name.split("-")[0] in want}
        assert all(_alive(pid) for pid in pids.values())
        if how == "SIGINT":
            os.killpg(run.pid, signal.SIGINT)  # Ctrl-C in a terminal: the foreground group (the server has its own)
        else:
            os.kill(run.pid, signal.SIGTERM)
        out, _ = run.communicate(timeout=30)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [name for name, pid in pids.items() if _alive(pid)], out[-3000:]
        assert "Interrupted" in out or "KeyboardInterrupt" in out, out[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        for p in tmp_path.iterdir():  # whatever is still up after a failure
            kind, _, pid = p.name.partition("-")
            if pid.isdigit() and _alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
