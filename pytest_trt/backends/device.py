"""Identity of the GPUs on this machine, without importing CUDA libraries."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_mib: int | None
    driver: str | None
    uuid: str | None = None

    @property
    def sm(self) -> str:
        """``"9.0"`` -> ``"SM90"``, the spelling of TensorRT's ComputeCapability enum."""
        return "SM" + self.compute_capability.replace(".", "")


def visible(found: tuple[Gpu, ...], spec: str | None) -> tuple[Gpu, ...]:
    """The GPUs a CUDA process sees under ``CUDA_VISIBLE_DEVICES=spec``, in that order.

    Ids are indices or UUID prefixes (``GPU-1a2b``); as in CUDA, the list ends
    at the first id that names no GPU.  nvidia-smi itself ignores the variable.
    """
    if spec is None:
        return found
    out: list[Gpu] = []
    for token in (t.strip() for t in spec.split(",")):
        match = next((g for g in found if str(g.index) == token or (g.uuid and token and g.uuid.startswith(token))),
                     None)
        if match is None:
            break
        out.append(match)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def gpus() -> tuple[Gpu, ...]:
    """GPUs this process can use: what ``nvidia-smi`` reports, filtered by ``CUDA_VISIBLE_DEVICES``.

    Empty when there is no driver or no device.  A pinned pytest-xdist worker
    (:mod:`pytest_trt.devices`) therefore sees its own GPU first.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap,memory.total,driver_version,uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    found = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (5, 6):
            continue
        idx, name, cc, mem, driver = parts[:5]
        uuid = parts[5] if len(parts) == 6 else None
        try:
            found.append(
                Gpu(int(idx), name, cc, int(float(mem)) if mem.replace(".", "").isdigit() else None, driver or None,
                    uuid or None)
            )
        except ValueError:
            continue
    return visible(tuple(found), os.environ.get("CUDA_VISIBLE_DEVICES"))


def no_gpu_reason() -> str | None:
    """Why no GPU can run engines here, or None when one is present."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    if not gpus():
        return "nvidia-smi reports no GPU"
    return None
