"""One GPU per pytest-xdist worker: the pinning decided at configure (logic in :mod:`pytest_trt.devices`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_trt import options as opt


@dataclass(frozen=True)
class Pinning:
    devices: tuple[str, ...]
    source: str
    pinned: str | None


def pin_at_configure(config: pytest.Config) -> Pinning | None:
    """Pin this process now, before anything can initialise CUDA, when devices are given or it is a worker.

    Otherwise nothing is pinned (None): the visible devices are looked up only for the header.
    """
    given = str(opt.value(config, opt.DEVICES_OPT) or "")
    workerinput = getattr(config, "workerinput", None)
    if given or workerinput:
        return pinning(given, workerinput)
    return None


def pinning(given: str, workerinput: dict[str, Any] | None) -> Pinning:
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
    return Pinning(devices, source, pinned)


def header(config: pytest.Config, state: Pinning) -> list[str]:
    from pytest_trt.devices import header_line

    if not state.devices and state.source == "nvidia-smi":
        return []  # no GPU and nothing asked: the plugin's device line says so already
    workers = config.getoption("numprocesses", default=None)
    return [header_line(state.devices, workers if isinstance(workers, int) and workers > 0 else None,
                        source=state.source)]
