"""One GPU per pytest-xdist worker: which device each worker uses, and pinning it.

Workers ``gw0, gw1, ...`` take the devices round-robin: the ``--trt-devices``
list (``0,1``), else every GPU this process may see (``CUDA_VISIBLE_DEVICES``
or, unset, the GPUs nvidia-smi lists).  A worker is pinned by setting
``CUDA_VISIBLE_DEVICES`` to its one device in ``pytest_configure``, before
any CUDA library is loaded (the plugin loads none at start), so inside the
worker that GPU is device 0 for TensorRT, pycuda and cuda-python alike.
Engines are cached per (config, device class): workers on two GPUs of the
same model share one build through the engine cache's file lock.

The pure logic (parsing, the round-robin map, pinning) takes no pytest object; :func:`pin_at_configure`
and :func:`header` apply it to a pytest run.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_trt import options as opt

ENV = "CUDA_VISIBLE_DEVICES"


def parse_devices(text: str) -> tuple[str, ...]:
    """``"0,1"`` -> ``("0", "1")``; device ids are indices or ``GPU-<uuid>`` / ``MIG-<uuid>`` names."""
    items = tuple(t.strip() for t in str(text).split(",") if t.strip())
    bad = [t for t in items if not re.fullmatch(r"\d+|(GPU|MIG)-[0-9A-Za-z\-/]+", t)]
    if not items or bad:
        raise ValueError(f"--trt-devices {text!r}: expected a comma-separated list of GPU indices like '0,1' "
                         f"(or GPU-<uuid> names); {'bad: ' + ', '.join(bad) if bad else 'the list is empty'}")
    if len(set(items)) != len(items):
        raise ValueError(f"--trt-devices {text!r}: a device is listed twice")
    return items


def visible_devices(env: Mapping[str, str], gpu_count: int) -> tuple[str, ...]:
    """The devices this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else ``0..gpu_count-1``."""
    if ENV in env:
        return tuple(t.strip() for t in env[ENV].split(",") if t.strip())
    return tuple(str(i) for i in range(gpu_count))


def worker_index(workerid: str | None) -> int | None:
    """``"gw3"`` -> 3; None outside pytest-xdist."""
    if not workerid:
        return None
    m = re.fullmatch(r"gw(\d+)", workerid)
    return int(m.group(1)) if m else None


def assign(index: int, devices: Sequence[str]) -> str:
    return devices[index % len(devices)]


def worker_map(workers: int, devices: Sequence[str]) -> list[tuple[str, str]]:
    return [(f"gw{i}", assign(i, devices)) for i in range(workers)]


def pin(device: str, env: dict[str, str] | None = None) -> None:
    """Make ``device`` the only GPU this process sees (call before any CUDA library initialises)."""
    target = os.environ if env is None else env
    target[ENV] = device  # hostprobe.gpus() filters by the variable on every call: nothing cached to forget


def header_line(devices: Sequence[str], workers: int | None, *, source: str) -> str:
    if not devices:
        return "pytest-trt: devices: no GPU to pin workers to"
    if workers:
        pairs = ", ".join(f"{w} -> GPU {d}" for w, d in worker_map(workers, devices))
        return f"pytest-trt: workers pinned round-robin over GPUs {','.join(devices)} ({source}): {pairs}"
    return f"pytest-trt: tests run on GPU {devices[0]} ({source}; one process)"




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
    from pytest_trt.common.hostprobe import gpus

    if given:
        try:
            devices, source = parse_devices(given), opt.DEVICES
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    else:
        source = ENV if ENV in os.environ else "nvidia-smi"
        devices = visible_devices(os.environ, len(gpus()))
    workerid = workerinput.get("workerid") if workerinput else None
    index = worker_index(workerid if isinstance(workerid, str) else None)
    pinned = None
    if devices and (index is not None or given):
        pinned = assign(index or 0, devices)
        pin(pinned)
    return Pinning(devices, source, pinned)


def header(config: pytest.Config, state: Pinning) -> list[str]:
    if not state.devices and state.source == "nvidia-smi":
        return []  # no GPU and nothing asked: the plugin's device line says so already
    workers = config.getoption("numprocesses", default=None)
    return [header_line(state.devices, workers if isinstance(workers, int) and workers > 0 else None,
                        source=state.source)]
