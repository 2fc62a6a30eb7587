"""Capture the environment a session runs in, as JSON-able data for ``environment.json``.

What is captured: backend and toolchain versions, CUDA runtime and driver,
cuDNN, the GPU(s) (or the CPU model), OS, Python, the git commit and dirty
flag of the project under test, ``pip freeze`` and the values of an
allowlist of build-relevant environment variables.

What is never captured, by design:

* values of any environment variable outside :data:`ENV_ALLOWLIST`
  (tokens and passwords live in environment variables);
* anything that changes between two runs of the same build on the same
  machine: capture time, PIDs, free GPU memory, temperatures, the Python
  executable path, the user name.  A bundle is then a pure function of the
  build and the machine, so the same build gives byte-identical bundles;
* the host name, unless asked for (``trt_bundle_hostname = true``).

Probes never raise: a missing tool or library records ``None``.
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

ENVIRONMENT_SCHEMA = 1

#: Environment variables whose *values* are recorded: each can change which
#: device is used or how kernels behave.  Nothing else is read.
ENV_ALLOWLIST = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_CACHE_DISABLE",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "PYTHONHASHSEED",
)

#: distributions whose versions are listed by name (the rest is in pip_freeze)
_PACKAGES = {
    "tensorrt": ("tensorrt",),
    "tensorrt_rtx": ("tensorrt_rtx", "tensorrt-rtx"),
    "onnx": ("onnx",),
    "onnxruntime": ("onnxruntime", "onnxruntime-gpu"),
    "numpy": ("numpy",),
    "h5py": ("h5py",),
    "cuda-python": ("cuda-python", "cuda-bindings"),
    "pytest": ("pytest",),
    "pytest-trt": ("pytest-trt", "pytest_trt"),
}
_BACKEND_MODULES = {"tensorrt": "tensorrt", "tensorrt-rtx": "tensorrt_rtx"}
_TIMEOUT_S = 10


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _name_and_version(dist: metadata.Distribution) -> tuple[str | None, str | None]:
    """The ``Name`` and ``Version`` headers of a distribution's metadata.

    Read from the header block directly: ``dist.metadata`` runs the e-mail parser over
    the whole file (a long description included), 10x slower over a typical
    environment, and this runs once per pytest session that writes bundles.
    """
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.splitlines():
        if not line:
            break  # end of the header block
        if name is None and line.startswith("Name:"):
            name = line[5:].strip()
        elif version is None and line.startswith("Version:"):
            version = line[8:].strip()
        if name is not None and version is not None:
            break
    return name, version


def pip_freeze() -> list[str]:
    """``name==version`` of every installed distribution, sorted; no paths (they name users)."""
    seen: dict[str, str] = {}
    for dist in metadata.distributions():
        name, version = _name_and_version(dist)
        if name:
            seen.setdefault(_canonical(name), f"{_canonical(name)}=={version}")
    return [seen[k] for k in sorted(seen)]


def _run(*cmd: str, cwd: Path | None = None) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def backend_versions(backend: str | None) -> dict[str, Any]:
    """Name, library version and ONNX parser version of ``backend``.

    The module's own ``__version__`` is used when it is already imported (the
    session built with it); otherwise the installed distribution's version, so
    capturing never pays for importing TensorRT.
    """
    out: dict[str, Any] = {"name": backend, "version": None, "onnx_parser": None}
    module_name = _BACKEND_MODULES.get(backend or "")
    if backend == "onnxruntime":
        out["version"] = _dist_version(*_PACKAGES["onnxruntime"])
    elif module_name is not None:
        module = sys.modules.get(module_name)
        if module is not None:
            out["version"] = getattr(module, "__version__", None)
            get_parser = getattr(module, "get_nv_onnx_parser_version", None)
            if get_parser is not None:
                try:
                    out["onnx_parser"] = str(get_parser())
                except Exception:  # noqa: BLE001 - a probe never fails the capture
                    pass
        if out["version"] is None:
            out["version"] = _dist_version(*_PACKAGES[module_name])
    return out


def _gpus() -> list[dict[str, Any]]:
    text = _run(
        "nvidia-smi",
        "--query-gpu=name,compute_cap,memory.total,driver_version,pci.bus_id",
        "--format=csv,noheader,nounits",
    )
    gpus = []
    for line in (text or "").splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5:
            continue
        name, cc, mem, driver, bus = fields
        gpus.append(
            {
                "name": name,
                "compute_capability": cc,
                "memory_total_mib": int(mem) if mem.isdigit() else None,
                "driver_version": driver,
                "pci_bus_id": bus,
            }
        )
    return gpus


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


def _cuda(gpus: list[dict[str, Any]]) -> dict[str, Any]:
    runtime, driver_cuda = _cuda_python_versions()
    if runtime is None:
        runtime = _dist_version("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")
    if driver_cuda is None and gpus:
        m = re.search(r"CUDA Version:\s*([\d.]+)", _run("nvidia-smi") or "")
        driver_cuda = m.group(1) if m else None
    return {
        "runtime": runtime,
        "driver_cuda": driver_cuda,  # highest CUDA version the driver supports
        "driver": gpus[0]["driver_version"] if gpus else None,
        "cudnn": _dist_version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn"),
    }


def _cpu() -> dict[str, Any]:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"model": model or platform.processor() or None, "count": os.cpu_count(), "machine": platform.machine()}


def _os() -> dict[str, Any]:
    try:
        distro = platform.freedesktop_os_release().get("PRETTY_NAME")
    except OSError:
        distro = None
    libc, libc_version = platform.libc_ver()
    return {
        "system": platform.system(),
        "release": platform.release(),
        "distribution": distro,
        "libc": f"{libc} {libc_version}".strip() or None,
    }


def git_state(rootdir: Path | None) -> dict[str, Any]:
    """Commit and dirty flag of the repository holding ``rootdir`` (``None`` outside git).

    Dirty means tracked files differ from the commit; untracked files are
    ignored, or writing the bundle folder itself would make the next run dirty.
    """
    if rootdir is None:
        return {"commit": None, "dirty": None}
    commit = _run("git", "-C", str(rootdir), "rev-parse", "--verify", "-q", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _run("git", "-C", str(rootdir), "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def capture_environment(
    *, backend: str | None = None, rootdir: Path | None = None, include_hostname: bool = False
) -> dict[str, Any]:
    """Everything :mod:`pytest_trt.audit.environment` promises, as a JSON-able dict."""
    gpus = _gpus()
    env = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    data: dict[str, Any] = {
        "schema": ENVIRONMENT_SCHEMA,
        "backend": backend_versions(backend),
        "packages": {key: _dist_version(*names) for key, names in sorted(_PACKAGES.items())},
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation()},
        "cuda": _cuda(gpus),
        "gpus": gpus,
        "cpu": _cpu(),
        "os": _os(),
        "git": git_state(rootdir),
        "env": env,
        "pip_freeze": pip_freeze(),
    }
    if include_hostname:
        data["hostname"] = socket.gethostname()
    return data
