"""Servers and workers a test run starts stop when the run is interrupted (Ctrl-C, SIGINT or SIGTERM).

A pytest plugin of the suite (``tests/conftest.py`` loads it; ``-p tests.interrupts`` elsewhere):

- :func:`spawn` starts a server in a process group of its own and registers the group in the run's registry, a
  folder named by ``PYTEST_TRT_PROC_REGISTRY`` (made by the controller, inherited by pytest-xdist workers);
  :func:`stop` stops the group (TERM, KILL after a grace period) and unregisters it.
- In the controller (or a run without xdist), SIGINT and SIGTERM stop every registered group and every process the
  run started (xdist workers, the pytest runs of pytester tests, their children), then interrupt the session
  (``KeyboardInterrupt``), so fixtures' teardown and the summary still run.
- A worker stops its own groups and descendants on SIGTERM and exits.

Linux only (the process tree is read from ``/proc``); elsewhere the handlers do nothing but the registry's groups.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

REGISTRY_ENV = "PYTEST_TRT_PROC_REGISTRY"
GRACE_S = 5.0
_made_registry: Path | None = None
_outer: str | None = None


def _registry() -> Path | None:
    folder = os.environ.get(REGISTRY_ENV)
    return Path(folder) if folder else None


def spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(cmd, **kwargs)`` in a new session (its own process group), registered for interrupts."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    folder = _registry()
    if folder is not None:
        with contextlib.suppress(OSError):
            (folder / f"{proc.pid}").write_text(str(os.getpid()), encoding="utf-8")
    return proc


def stop(proc: subprocess.Popen[Any], grace_s: float = GRACE_S) -> None:
    """Stop a process :func:`spawn` started, with its whole group: TERM, then KILL after ``grace_s``."""
    _stop_groups([proc.pid], grace_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    folder = _registry()
    if folder is not None:
        with contextlib.suppress(OSError):
            (folder / f"{proc.pid}").unlink()


def _signal(pids: Iterable[int], sig: int, *, group: bool) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            (os.killpg if group else os.kill)(pid, sig)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _stop_groups(groups: list[int], grace_s: float) -> None:
    _signal(groups, signal.SIGTERM, group=True)
    deadline = time.monotonic() + grace_s
    while any(_alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal(groups, signal.SIGKILL, group=True)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` in the process tree (read from ``/proc``; empty where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat") if Path("/proc").is_dir() else ():
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def stop_everything(*, own_groups_only: bool) -> None:
    """Stop the registered groups (a worker: only those it started) and every descendant of this process."""
    tree = descendants(os.getpid())
    folder = _registry()
    groups: list[int] = []
    if folder is not None and folder.is_dir():
        for entry in folder.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if not own_groups_only or int(entry.read_text(encoding="utf-8")) == os.getpid():
                    groups.append(int(entry.name))
    _signal(groups, signal.SIGTERM, group=True)
    _signal(tree, signal.SIGTERM, group=False)
    deadline = time.monotonic() + GRACE_S
    while any(_alive(p) for p in [*groups, *tree]) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal(groups, signal.SIGKILL, group=True)
    _signal(tree, signal.SIGKILL, group=False)


def _on_controller_signal(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while stopping: ignored
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop_everything(own_groups_only=False)
    raise KeyboardInterrupt(f"interrupted by signal {signal.Signals(signum).name}")


def _on_worker_signal(signum: int, frame: Any) -> None:
    stop_everything(own_groups_only=True)
    os._exit(128 + signum)


def pytest_configure(config: pytest.Config) -> None:
    global _made_registry, _outer
    worker = hasattr(config, "workerinput")
    if not worker:  # a run's own registry, also inside another run (a pytest subprocess of a test)
        _outer = os.environ.get(REGISTRY_ENV)
        _made_registry = Path(tempfile.mkdtemp(prefix="pytest-trt-procs-"))
        os.environ[REGISTRY_ENV] = str(_made_registry)  # before xdist starts its workers: they inherit it
    with contextlib.suppress(ValueError):  # not the main thread (an in-process run inside a thread): no handlers
        if worker:
            signal.signal(signal.SIGTERM, _on_worker_signal)
        else:
            signal.signal(signal.SIGINT, _on_controller_signal)
            signal.signal(signal.SIGTERM, _on_controller_signal)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _made_registry
    if _made_registry is not None:
        left = [int(p.name) for p in _made_registry.iterdir() if p.name.isdigit()]
        _stop_groups(left, GRACE_S)  # groups a fixture left behind (a teardown that never ran)
        shutil.rmtree(_made_registry, ignore_errors=True)
        if _outer is None:
            os.environ.pop(REGISTRY_ENV, None)
        else:
            os.environ[REGISTRY_ENV] = _outer
        _made_registry = None
