"""The device-buffer interface the GPU runner uses, and the choice between its two implementations.

``pycuda`` (the user's choice, :mod:`pytest_trt.backends.cuda_pycuda`) and
``cuda-python`` (:mod:`pytest_trt.backends.cuda`) both provide streams,
growable device buffers, pinned host buffers and events, raise
``RuntimeError("CUDA call failed: ...")`` on any failed call, and work on the
device's primary context, which TensorRT uses.  :func:`load` picks the first
installed of :data:`ORDER`, or the one named by ``prefer`` / the
``PYTEST_TRT_CUDA`` environment variable.  Nothing here imports a CUDA
binding until :func:`load` runs.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Protocol

import numpy as np

from pytest_trt.errors import EngineNotRunnable

__all__ = ["ENV", "ORDER", "CudaApi", "available", "load"]

#: implementations in order of preference, with the module that must be importable
ORDER = (("pycuda", "pycuda"), ("cuda-python", "cuda"))
ENV = "PYTEST_TRT_CUDA"


class StreamLike(Protocol):
    handle: Any

    def synchronize(self) -> None: ...

    def close(self) -> None: ...


class DeviceMemory(Protocol):
    ptr: int
    nbytes: int

    def reserve(self, nbytes: int) -> None: ...

    def upload(self, array: np.ndarray, stream: Any) -> None: ...

    def download(self, out: np.ndarray, stream: Any) -> np.ndarray: ...

    def free(self) -> None: ...


class HostMemory(Protocol):
    def array(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray: ...

    def free(self) -> None: ...


class EventLike(Protocol):
    def record(self, stream: Any) -> None: ...

    def synchronize(self) -> None: ...

    def elapsed_ms(self, start: Any) -> float: ...


class CudaApi(Protocol):
    name: str

    def set_device(self, index: int) -> None: ...

    def device_count(self) -> int: ...

    def stream(self) -> StreamLike: ...

    def device_buffer(self, nbytes: int = 0) -> DeviceMemory: ...

    def host_buffer(self) -> HostMemory: ...

    def event(self) -> EventLike: ...


def available() -> tuple[str, ...]:
    """Implementations whose binding is installed, in order of preference."""
    return tuple(name for name, module in ORDER if importlib.util.find_spec(module) is not None)


def load(prefer: str | None = None, *, device: int = 0) -> CudaApi:
    """The CUDA binding: ``prefer`` (or ``$PYTEST_TRT_CUDA``), else the first installed of pycuda, cuda-python."""
    wanted = prefer or os.environ.get(ENV) or None
    names = [n for n, _ in ORDER]
    if wanted is not None and wanted not in names:
        raise EngineNotRunnable(f"{ENV}={wanted!r} names no CUDA binding; choose one of {', '.join(names)}")
    installed = available()
    if wanted is not None and wanted not in installed:
        raise EngineNotRunnable(f"the CUDA binding {wanted!r} was asked for but is not installed "
                                f"(installed: {', '.join(installed) or 'none'}); pip install 'pytest-trt[gpu]' "
                                f"(cuda-python) or 'pytest-trt[pycuda]'")
    choice = wanted or (installed[0] if installed else None)
    if choice is None:
        raise EngineNotRunnable("neither pycuda nor cuda-python is installed: pip install 'pytest-trt[pycuda]' "
                                "or 'pytest-trt[gpu]'")
    if choice == "pycuda":
        from pytest_trt.backends.cuda_pycuda import PycudaApi

        return PycudaApi(device)
    from pytest_trt.backends.cuda import CudaPythonApi

    return CudaPythonApi(device)
