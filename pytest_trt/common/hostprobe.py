"""What this machine is: its GPUs (nvidia-smi), its CPU (/proc/cpuinfo) and its CUDA versions.

One probe of each, cached per process (:func:`clear` forgets them, for tests
that fake nvidia-smi).  No CUDA library is imported to list GPUs; probes never
raise: a missing tool or library gives an empty or ``None`` answer.  Used by
the backends (device identity, cache keys), the report header, worker
pinning and environment capture.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass

_TIMEOUT_S = 30
#: the ISA extensions that change which kernels (and NCHWc block size) ONNX Runtime picks
ISA_FLAGS = ("avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "avx2", "fma", "avx_vnni", "asimd", "sve")
_QUERY = "index,name,compute_cap,memory.total,driver_version,uuid,pci.bus_id"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_mib: int | None
    driver: str | None
    uuid: str | None = None
    pci_bus_id: str | None = None

    @property
    def sm(self) -> str:
        """``"9.0"`` -> ``"SM90"``, the spelling of TensorRT's ComputeCapability enum."""
        return "SM" + self.compute_capability.replace(".", "")


@dataclass(frozen=True)
class Cpu:
    model: str | None  # "model name" (x86) or "Model"/"Hardware" (ARM) of /proc/cpuinfo, else platform.processor()
    flags: frozenset[str]
    machine: str
    count: int | None

    @property
    def isa(self) -> list[str]:
        """The vector ISA extensions of :data:`ISA_FLAGS` this CPU has, in that order."""
        return [f for f in ISA_FLAGS if f in self.flags]


def _run(*cmd: str) -> str | None:
    exe = shutil.which(cmd[0])
    if exe is None:
        return None
    try:
        proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


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


def _parse_gpu(line: str) -> Gpu | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) not in (5, 6, 7):
        return None
    idx, name, cc, mem, driver = parts[:5]
    uuid = parts[5] if len(parts) > 5 else None
    bus = parts[6] if len(parts) > 6 else None
    try:
        return Gpu(int(idx), name, cc, int(float(mem)) if mem.replace(".", "").isdigit() else None, driver or None,
                   uuid or None, bus or None)
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def all_gpus() -> tuple[Gpu, ...]:
    """Every GPU ``nvidia-smi`` lists, whatever ``CUDA_VISIBLE_DEVICES`` says; empty without driver or device."""
    out = _run("nvidia-smi", f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits")
    return tuple(g for g in (_parse_gpu(line) for line in (out or "").strip().splitlines()) if g is not None)


def gpus() -> tuple[Gpu, ...]:
    """GPUs this process can use: :func:`all_gpus` filtered by ``CUDA_VISIBLE_DEVICES``.

    A pinned pytest-xdist worker (:mod:`pytest_trt.pytest_plugin.devices`) therefore sees its own GPU first.
    """
    return visible(all_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES"))


def no_gpu_reason() -> str | None:
    """Why no GPU can run engines here, or None when one is present."""
    if shutil.which("nvidia-smi") is None:
        return "no NVIDIA driver on this machine (nvidia-smi not found)"
    if not gpus():
        return "nvidia-smi reports no GPU"
    return None


@functools.lru_cache(maxsize=1)
def cpu() -> Cpu:
    """The CPU's model name and flags (from /proc/cpuinfo, else ``platform``)."""
    model, flags = "", frozenset[str]()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "Hardware") and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = frozenset(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    return Cpu(model=model or platform.processor() or None, flags=flags, machine=platform.machine(),
               count=os.cpu_count())


@dataclass(frozen=True)
class CudaVersions:
    runtime: str | None  # CUDA runtime cuda-python loads
    driver_cuda: str | None  # highest CUDA version the driver supports


def _cuda_python_versions() -> tuple[str | None, str | None]:
    """(runtime, driver) CUDA versions from cuda-python, when it is installed."""
    try:
        try:
            from cuda.bindings import runtime as cudart  # cuda-python >= 12.6
        except ImportError:
            from cuda import cudart
        err, rt = cudart.cudaRuntimeGetVersion()
        err2, drv = cudart.cudaDriverGetVersion()
    except Exception:  # noqa: BLE001 - missing library or no driver
        return None, None

    def fmt(v: int) -> str:
        return f"{v // 1000}.{(v % 1000) // 10}"

    return (fmt(rt) if int(err) == 0 else None), (fmt(drv) if int(err2) == 0 and drv else None)


@functools.lru_cache(maxsize=1)
def cuda_versions() -> CudaVersions:
    """The CUDA runtime and driver versions, from cuda-python, else the driver's ``nvidia-smi`` banner."""
    runtime, driver_cuda = _cuda_python_versions()
    if driver_cuda is None and all_gpus():
        m = re.search(r"CUDA Version:\s*([\d.]+)", _run("nvidia-smi") or "")
        driver_cuda = m.group(1) if m else None
    return CudaVersions(runtime=runtime, driver_cuda=driver_cuda)


def clear() -> None:
    """Forget every cached probe (tests that put a fake nvidia-smi on PATH)."""
    all_gpus.cache_clear()
    cpu.cache_clear()
    cuda_versions.cache_clear()
