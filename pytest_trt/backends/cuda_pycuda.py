"""Device buffers, pinned host buffers, streams and events through pycuda (the user's choice of CUDA binding).

The second implementation of :class:`pytest_trt.backends.cudaapi.CudaApi`,
interchangeable with :mod:`pytest_trt.backends.cuda` (cuda-python).  pycuda
raises ``pycuda.driver.Error`` on any failed call; every call here is wrapped
so both implementations raise the same ``RuntimeError("CUDA call failed: ...")``.

TensorRT uses the device's *primary* context (the runtime API's), so this
module retains and pushes that context instead of creating its own
(``pycuda.autoinit`` would make a second context TensorRT does not see).
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from pytest_trt.errors import EngineNotRunnable

T = TypeVar("T")


def driver() -> Any:
    try:
        import pycuda.driver as drv
    except ImportError as exc:
        raise EngineNotRunnable("pycuda is not installed: pip install 'pytest-trt[pycuda]'") from exc
    drv.init()
    return drv


def checked(call: Callable[..., T], *args: Any) -> T:
    """Run a pycuda call, turning its exception into the interface's RuntimeError."""
    drv = driver()
    try:
        return call(*args)
    except drv.Error as exc:
        raise RuntimeError(f"CUDA call failed: {type(exc).__name__}: {exc}") from exc


class Stream:
    def __init__(self) -> None:
        self.drv = driver()
        self.stream = checked(self.drv.Stream)
        self.handle: int | None = int(self.stream.handle)

    def synchronize(self) -> None:
        checked(self.stream.synchronize)

    def close(self) -> None:
        self.synchronize()
        self.handle = None


class DeviceBuffer:
    """A device allocation that grows on demand and copies numpy arrays in and out."""

    def __init__(self, nbytes: int = 0) -> None:
        self.drv = driver()
        self.alloc: Any = None
        self.ptr = 0
        self.nbytes = 0
        if nbytes:
            self.reserve(nbytes)

    def reserve(self, nbytes: int) -> None:
        if nbytes <= self.nbytes:
            return
        self.free()
        self.alloc = checked(self.drv.mem_alloc, max(nbytes, 1))
        self.ptr = int(self.alloc)
        self.nbytes = nbytes

    def upload(self, array: np.ndarray, stream: Stream) -> None:
        array = np.ascontiguousarray(array)
        self.reserve(array.nbytes)
        checked(self.drv.memcpy_htod_async, self.alloc, array, stream.stream)

    def download(self, out: np.ndarray, stream: Stream) -> np.ndarray:
        if out.nbytes > self.nbytes:
            raise ValueError(f"download of {out.nbytes} bytes from a {self.nbytes}-byte buffer")
        checked(self.drv.memcpy_dtoh_async, out, self.alloc, stream.stream)
        return out

    def free(self) -> None:
        if self.alloc is not None:
            checked(self.alloc.free)
            self.alloc = None
            self.ptr = 0
            self.nbytes = 0


class PinnedBuffer:
    """Page-locked host memory (``pagelocked_empty``) that grows on demand."""

    def __init__(self) -> None:
        self.drv = driver()
        self.host: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        return 0 if self.host is None else int(self.host.nbytes)

    def array(self, shape: tuple[int, ...], dtype: np.dtype[Any] | str) -> np.ndarray:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if self.host is None or nbytes > self.host.nbytes:
            self.host = checked(self.drv.pagelocked_empty, max(nbytes, 1), np.uint8)
        assert self.host is not None
        return self.host[:nbytes].view(dt).reshape(shape)

    def free(self) -> None:
        if self.host is not None:
            free = getattr(self.host.base, "free", None)  # the HostAllocation pagelocked_empty made
            if free is not None:
                checked(free)
            self.host = None


class Event:
    def __init__(self) -> None:
        self.drv = driver()
        self.event = checked(self.drv.Event)

    def record(self, stream: Stream) -> None:
        checked(self.event.record, stream.stream)

    def synchronize(self) -> None:
        checked(self.event.synchronize)

    def elapsed_ms(self, start: Event) -> float:
        self.synchronize()
        return float(checked(self.event.time_since, start.event))

    def close(self) -> None:
        pass


class PycudaApi:
    """:class:`~pytest_trt.backends.cudaapi.CudaApi` over pycuda, on the device's primary context."""

    name = "pycuda"

    def __init__(self, device: int = 0) -> None:
        self.drv = driver()
        self.context: Any = None
        self.set_device(device)
        # pycuda reports a context still pushed at interpreter exit as an error: pop ours first
        atexit.register(self.close)

    def set_device(self, index: int) -> None:
        device = checked(self.drv.Device, index)  # an invalid index fails before the current context is left
        if self.context is not None:
            checked(self.context.pop)
        self.context = checked(device.retain_primary_context)
        checked(self.context.push)
        self.device = index

    def device_count(self) -> int:
        return int(checked(self.drv.Device.count))

    def close(self) -> None:
        """Leave the primary context (idempotent; also run at interpreter exit)."""
        if self.context is not None:
            context, self.context = self.context, None
            checked(context.pop)

    def stream(self) -> Stream:
        return Stream()

    def device_buffer(self, nbytes: int = 0) -> DeviceBuffer:
        return DeviceBuffer(nbytes)

    def host_buffer(self) -> PinnedBuffer:
        return PinnedBuffer()

    def event(self) -> Event:
        return Event()
