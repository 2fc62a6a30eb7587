"""Device buffers and streams through cuda-python's runtime bindings.

Only the GPU runner imports this.  cuda-python moved its runtime module from
``cuda.cudart`` to ``cuda.bindings.runtime`` in 12.6; both are accepted.
Every call's error code is checked: a failed copy must never yield stale data.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from pytest_trt.errors import EngineNotRunnable


def cudart() -> ModuleType:
    try:
        from cuda.bindings import runtime  # cuda-python >= 12.6
    except ImportError:
        try:
            from cuda import cudart as runtime  # older cuda-python
        except ImportError as exc:
            raise EngineNotRunnable("cuda-python is not installed: pip install 'pytest-trt[gpu]'") from exc
    return runtime  # type: ignore[no-any-return]


def check(result: Any) -> Any:
    """Unpack a cuda-python ``(err, *values)`` tuple, raising on any error code."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        rt = cudart()
        name = rt.cudaGetErrorName(err)[1]
        raise RuntimeError(f"CUDA call failed: {name.decode() if isinstance(name, bytes) else name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


class Stream:
    def __init__(self) -> None:
        self.rt = cudart()
        self.handle = check(self.rt.cudaStreamCreate())

    def synchronize(self) -> None:
        check(self.rt.cudaStreamSynchronize(self.handle))

    def close(self) -> None:
        if self.handle is not None:
            check(self.rt.cudaStreamDestroy(self.handle))
            self.handle = None


class DeviceBuffer:
    """A device allocation that grows on demand and copies numpy arrays in and out."""

    def __init__(self, nbytes: int = 0) -> None:
        self.rt = cudart()
        self.ptr = 0
        self.nbytes = 0
        if nbytes:
            self.reserve(nbytes)

    def reserve(self, nbytes: int) -> None:
        if nbytes <= self.nbytes:
            return
        self.free()
        self.ptr = int(check(self.rt.cudaMalloc(max(nbytes, 1))))
        self.nbytes = nbytes

    def upload(self, array: np.ndarray, stream: Stream) -> None:
        array = np.ascontiguousarray(array)
        self.reserve(array.nbytes)
        kind = self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        check(self.rt.cudaMemcpyAsync(self.ptr, array.ctypes.data, array.nbytes, kind, stream.handle))

    def download(self, out: np.ndarray, stream: Stream) -> np.ndarray:
        if out.nbytes > self.nbytes:
            raise ValueError(f"download of {out.nbytes} bytes from a {self.nbytes}-byte buffer")
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        check(self.rt.cudaMemcpyAsync(out.ctypes.data, self.ptr, out.nbytes, kind, stream.handle))
        return out

    def free(self) -> None:
        if self.ptr:
            check(self.rt.cudaFree(self.ptr))
            self.ptr = 0
            self.nbytes = 0

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass
