"""pytest hooks pinning each pytest-xdist worker to one GPU (logic in :mod:`pytest_trt.devices`).

Registered by ``pytest_trt.plugin`` (``HOOK_MODULES``); imports no CUDA library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from pytest_trt import options as opt


@dataclass(frozen=True)
class _Pinning:
    devices: tuple[str, ...]
    source: str
    pinned: str | None


_PINNING = pytest.StashKey[_Pinning]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trt")
    group.addoption(opt.DEVICES, dest="trt_devices", default=None, metavar="IDS",
                    help="GPUs the pytest-xdist workers take round-robin, e.g. '0,1' "
                         "(default: every visible GPU); each worker sees only its own")
    parser.addini(opt.INI_DEVICES, "GPUs for the pytest-xdist workers, e.g. 0,1", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("trt_devices") or str(config.getini(opt.INI_DEVICES) or "")
    workerinput = getattr(config, "workerinput", None)
    if given or workerinput:  # pins now, before anything can initialise CUDA
        config.stash[_PINNING] = _pinning(config, given, workerinput)
    # otherwise nothing is pinned: the visible devices are looked up only for the header


def _pinning(config: pytest.Config, given: str, workerinput: dict[str, object] | None) -> _Pinning:
    from pytest_trt import devices as dev
    from pytest_trt.hostprobe import gpus

    if given:
        try:
            devices, source = dev.parse_devices(given), opt.DEVICES
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    else:
        source = dev.ENV if dev.ENV in os.environ else "nvidia-smi"
        devices = dev.visible_devices(os.environ, len(gpus()))
    workerid = workerinput.get("workerid") if workerinput else None
    index = dev.worker_index(workerid if isinstance(workerid, str) else None)
    pinned = None
    if devices and (index is not None or given):
        pinned = dev.assign(index or 0, devices)
        dev.pin(pinned)
    return _Pinning(devices, source, pinned)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from pytest_trt.devices import header_line

    state = config.stash.get(_PINNING, None)
    if state is None:  # not pinned: nothing is pinned by this call either (no index, nothing given)
        state = config.stash[_PINNING] = _pinning(config, "", None)
    if not state.devices and state.source == "nvidia-smi":
        return []  # no GPU and nothing asked: the plugin's device line says so already
    workers = config.getoption("numprocesses", default=None)
    return [header_line(state.devices, workers if isinstance(workers, int) and workers > 0 else None,
                        source=state.source)]


@pytest.fixture(scope="session")
def trt_device(pytestconfig: pytest.Config) -> str | None:
    """The GPU this process is pinned to (its id before pinning), or None when not pinned."""
    state = pytestconfig.stash.get(_PINNING, None)
    return state.pinned if state else None
