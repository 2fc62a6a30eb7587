"""Identity of the GPUs on this machine, without importing CUDA libraries."""

from __future__ import annotations

import functools
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

    @property
    def sm(self) -> str:
        """``"9.0"`` -> ``"SM90"``, the spelling of TensorRT's ComputeCapability enum."""
        return "SM" + self.compute_capability.replace(".", "")


@functools.lru_cache(maxsize=1)
def gpus() -> tuple[Gpu, ...]:
    """GPUs that ``nvidia-smi`` reports; empty when there is no driver or no device."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return ()
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"],
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
        if len(parts) != 5:
            continue
        idx, name, cc, mem, driver = parts
        try:
            found.append(
                Gpu(int(idx), name, cc, int(float(mem)) if mem.replace(".", "").isdigit() else None, driver or None)
            )
        except ValueError:
            continue
    return tuple(found)


def no_gpu_reason() -> str | None:
    """Why no GPU can run engines here, or None when one is present."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    if not gpus():
        return "nvidia-smi reports no GPU"
    return None
