"""Device buffers, pinned host buffers, streams and events through cuda-python's runtime bindings.

One of the two implementations of :class:`pytest_trt.backends.cudaapi.CudaApi`
(the other, :mod:`pytest_trt.backends.cuda_pycuda`, uses pycuda).
Only the GPU runner imports this.  cuda-python moved its runtime module from
``cuda.cudart`` to ``cuda.bindings.runtime`` in 12.6; both are accepted.
Every call's error code is checked: a failed copy must never yield stale data.
"""

from __future__ import annotations

import ctypes
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


class PinnedBuffer:
    """Page-locked host memory (``cudaMallocHost``) that grows on demand; ``array()`` views it as numpy.

    Copies between pinned memory and the device run truly asynchronously on
    the stream; from pageable memory the driver stages them synchronously.
    """

    def __init__(self) -> None:
        self.rt = cudart()
        self.ptr = 0
        self.nbytes = 0

    def array(self, shape: tuple[int, ...], dtype: np.dtype[Any] | str) -> np.ndarray:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if nbytes > self.nbytes:
            self.free()
            self.ptr = int(check(self.rt.cudaMallocHost(max(nbytes, 1))))
            self.nbytes = nbytes
        raw = (ctypes.c_byte * max(nbytes, 1)).from_address(self.ptr)
        flat: np.ndarray = np.frombuffer(memoryview(raw).cast("B"), dtype=dt, count=nbytes // dt.itemsize)
        return flat.reshape(shape)

    def free(self) -> None:
        if self.ptr:
            check(self.rt.cudaFreeHost(self.ptr))
            self.ptr = 0
            self.nbytes = 0

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


class Event:
    def __init__(self) -> None:
        self.rt = cudart()
        self.handle = check(self.rt.cudaEventCreate())

    def record(self, stream: Stream) -> None:
        check(self.rt.cudaEventRecord(self.handle, stream.handle))

    def synchronize(self) -> None:
        check(self.rt.cudaEventSynchronize(self.handle))

    def elapsed_ms(self, start: Event) -> float:
        """Milliseconds from ``start`` to this event (both recorded; waits for this one)."""
        self.synchronize()
        return float(check(self.rt.cudaEventElapsedTime(start.handle, self.handle)))

    def close(self) -> None:
        if self.handle is not None:
            check(self.rt.cudaEventDestroy(self.handle))
            self.handle = None


class CudaPythonApi:
    """:class:`~pytest_trt.backends.cudaapi.CudaApi` over cuda-python's runtime API."""

    name = "cuda-python"

    def __init__(self, device: int = 0) -> None:
        self.rt = cudart()
        self.set_device(device)

    def set_device(self, index: int) -> None:
        check(self.rt.cudaSetDevice(index))
        self.device = index

    def device_count(self) -> int:
        return int(check(self.rt.cudaGetDeviceCount()))

    def stream(self) -> Stream:
        return Stream()

    def device_buffer(self, nbytes: int = 0) -> DeviceBuffer:
        return DeviceBuffer(nbytes)

    def host_buffer(self) -> PinnedBuffer:
        return PinnedBuffer()

    def event(self) -> Event:
        return Event()
