"""Executes a serialized TensorRT / TensorRT-RTX engine on the GPU (name-based I/O API, TensorRT 8.5+).

Written against NVIDIA's documented Python API: ``Runtime.deserialize_cuda_engine``,
``ICudaEngine.num_io_tensors`` / ``get_tensor_name`` / ``get_tensor_mode`` /
``get_tensor_dtype`` / ``get_tensor_shape`` / ``num_optimization_profiles`` /
``get_tensor_profile_shape``, ``IExecutionContext.set_optimization_profile_async``,
``set_input_shape``, ``set_tensor_address``, ``set_output_allocator`` and
``execute_async_v3``, and ``IOutputAllocator`` (``reallocate_output``,
``reallocate_output_async`` from TensorRT 10, ``notify_shape``) for outputs
whose shape depends on the data (NonZero, NMS).

One runner owns one execution context, one CUDA stream, its device buffers
and its pinned host staging buffers; the CUDA binding is pycuda or
cuda-python (:mod:`pytest_trt.backends.cudaapi`).  The optimization profile
is chosen per call from the input shapes.  It needs a GPU the module
supports; this repository's CI has none, so its tests skip there with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_trt.backends import cudaapi
from pytest_trt.backends.base import RunnerTensors, TensorSpec
from pytest_trt.errors import EngineNotRunnable, InputMismatch

ShapeRange = tuple[tuple[int, ...], tuple[int, ...]]  # (min, max)


def select_profile(profiles: Sequence[Mapping[str, ShapeRange]], shapes: Mapping[str, tuple[int, ...]]) -> int:
    """Index of the first profile whose min..max holds every input shape.

    Raises :class:`~pytest_trt.errors.InputMismatch` listing the profiles when none does.
    """
    for k, ranges in enumerate(profiles):
        if all(
            name in ranges
            and len(shape) == len(ranges[name][0])
            and all(a <= d <= b for a, d, b in zip(ranges[name][0], shape, ranges[name][1], strict=True))
            for name, shape in shapes.items()
        ):
            return k
    listed = "; ".join(
        f"profile {k}: " + ", ".join(f"{n} {lo}..{hi}" for n, (lo, hi) in sorted(r.items()))
        for k, r in enumerate(profiles)
    )
    raise InputMismatch(f"input shapes {dict(shapes)} fit none of the engine's optimization profiles ({listed}); "
                        f"pass shapes inside one of them")


def _output_allocator(trt: Any, api: cudaapi.CudaApi) -> Any:
    """An ``IOutputAllocator`` giving data-dependent outputs device memory and recording their final shapes."""

    class OutputAllocator(trt.IOutputAllocator):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffers: dict[str, cudaapi.DeviceMemory] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(self, tensor_name: str, memory: Any, size: int, alignment: int) -> int:
            buf = self.buffers.setdefault(tensor_name, api.device_buffer())
            buf.reserve(max(int(size), 1))  # cudaMalloc alignment (256 B) covers TensorRT's requests
            return buf.ptr

        def reallocate_output_async(self, tensor_name: str, memory: Any, size: int, alignment: int,
                                    stream: Any) -> int:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(int(d) for d in shape)

    return OutputAllocator()


class EventTimer:
    """CUDA events recorded on the runner's stream around one run (see :mod:`pytest_trt.engines.benchmark`)."""

    name = "cuda-events"

    def __init__(self, api: cudaapi.CudaApi, stream: Any) -> None:
        self.stream = stream
        self.begin, self.end = api.event(), api.event()

    def start(self) -> None:
        self.begin.record(self.stream)

    def stop(self) -> float:
        self.end.record(self.stream)
        return self.end.elapsed_ms(self.begin)


class TrtRunner(RunnerTensors):
    def __init__(self, trt: Any, logger: Any, engine_bytes: bytes, *, api: cudaapi.CudaApi | None = None) -> None:
        self.trt = trt
        self.api = api if api is not None else cudaapi.load()
        self.runtime = trt.Runtime(logger)
        self.engine = self.runtime.deserialize_cuda_engine(engine_bytes)
        if self.engine is None:
            raise EngineNotRunnable("TensorRT could not deserialize the engine on this GPU (see the TensorRT log)")
        self.context = self.engine.create_execution_context()
        if self.context is None:
            raise EngineNotRunnable("TensorRT could not create an execution context (out of device memory?)")
        self.stream = self.api.stream()
        specs_in: list[TensorSpec] = []
        specs_out: list[TensorSpec] = []
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            spec = TensorSpec(
                name,
                np.dtype(trt.nptype(self.engine.get_tensor_dtype(name))).name,
                tuple(self.engine.get_tensor_shape(name)),
            )
            is_input = self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (specs_in if is_input else specs_out).append(spec)
        self._inputs, self._outputs = tuple(specs_in), tuple(specs_out)
        self.profiles = self._profiles()
        self.profile = 0
        self.buffers = {s.name: self.api.device_buffer() for s in (*specs_in, *specs_out)}
        self.staging = {s.name: self.api.host_buffer() for s in (*specs_in, *specs_out)}
        self.allocator: Any = None

    def _profiles(self) -> list[dict[str, ShapeRange]]:
        out = []
        for k in range(int(getattr(self.engine, "num_optimization_profiles", 1))):
            ranges = {}
            for spec in self._inputs:
                if -1 not in spec.shape:
                    ranges[spec.name] = (spec.shape, spec.shape)
                    continue
                lo, _opt, hi = self.engine.get_tensor_profile_shape(spec.name, k)
                ranges[spec.name] = (tuple(lo), tuple(hi))
            out.append(ranges)
        return out

    def timer(self) -> EventTimer:
        return EventTimer(self.api, self.stream)

    def _use_profile(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        k = select_profile(self.profiles, shapes) if len(self.profiles) > 1 else 0
        if k != self.profile:
            if not self.context.set_optimization_profile_async(k, self.stream.handle):
                raise RuntimeError(f"IExecutionContext.set_optimization_profile_async({k}) failed (see the log)")
            self.profile = k

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = {s.name: np.ascontiguousarray(feeds[s.name]) for s in self._inputs}
        self._use_profile({n: tuple(a.shape) for n, a in arrays.items()})
        for spec in self._inputs:
            array = arrays[spec.name]
            if not self.context.set_input_shape(spec.name, array.shape):
                raise InputMismatch(f"TensorRT refused shape {array.shape} for input {spec.name!r} "
                                    f"(profile {self.profile})")
            host = self.staging[spec.name].array(array.shape, array.dtype)
            np.copyto(host, array)  # pinned staging: the copy to the device is truly asynchronous
            buf = self.buffers[spec.name]
            buf.upload(host, self.stream)
            self.context.set_tensor_address(spec.name, buf.ptr)
        fixed: dict[str, tuple[int, ...]] = {}
        for spec in self._outputs:
            shape = tuple(self.context.get_tensor_shape(spec.name))
            if -1 in shape:  # data-dependent: TensorRT asks the allocator once it knows the size
                if self.allocator is None:
                    self.allocator = _output_allocator(self.trt, self.api)
                self.context.set_output_allocator(spec.name, self.allocator)
                continue
            buf = self.buffers[spec.name]
            buf.reserve(int(np.prod(shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize)
            self.context.set_tensor_address(spec.name, buf.ptr)
            fixed[spec.name] = shape
        if not self.context.execute_async_v3(self.stream.handle):
            raise RuntimeError("IExecutionContext.execute_async_v3 failed (see the TensorRT log)")
        staged: dict[str, np.ndarray] = {}
        for spec in self._outputs:
            if spec.name in fixed:
                shape, buf = fixed[spec.name], self.buffers[spec.name]
            else:
                self.stream.synchronize()  # notify_shape has run once the work is done
                shape, buf = self.allocator.shapes[spec.name], self.allocator.buffers[spec.name]
            host = self.staging[spec.name].array(shape, spec.dtype)
            buf.download(host, self.stream)
            staged[spec.name] = host
        self.stream.synchronize()
        return {name: host.copy() for name, host in staged.items()}  # staging is reused by the next call
