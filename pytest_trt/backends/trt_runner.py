"""Executes a serialized TensorRT / TensorRT-RTX engine on the GPU (name-based I/O API, TensorRT 8.5+).

Written against NVIDIA's documented Python API: ``Runtime.deserialize_cuda_engine``,
``ICudaEngine.num_io_tensors`` / ``get_tensor_name`` / ``get_tensor_mode`` /
``get_tensor_dtype`` / ``get_tensor_shape``, ``IExecutionContext.set_input_shape``,
``set_tensor_address`` and ``execute_async_v3``.  It needs a GPU the module
supports; this repository's CI has none, so its tests skip there with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_trt.backends.base import TensorSpec
from pytest_trt.backends.cuda import DeviceBuffer, Stream
from pytest_trt.errors import EngineNotRunnable


class TrtRunner:
    def __init__(self, trt: Any, logger: Any, engine_bytes: bytes) -> None:
        self.trt = trt
        self.runtime = trt.Runtime(logger)
        self.engine = self.runtime.deserialize_cuda_engine(engine_bytes)
        if self.engine is None:
            raise EngineNotRunnable("TensorRT could not deserialize the engine on this GPU (see the TensorRT log)")
        self.context = self.engine.create_execution_context()
        self.stream = Stream()
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
        self.buffers = {s.name: DeviceBuffer() for s in (*specs_in, *specs_out)}

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        for spec in self._inputs:
            array = np.ascontiguousarray(feeds[spec.name])
            self.context.set_input_shape(spec.name, array.shape)
            buf = self.buffers[spec.name]
            buf.upload(array, self.stream)
            self.context.set_tensor_address(spec.name, buf.ptr)
        results = {}
        for spec in self._outputs:
            shape = tuple(self.context.get_tensor_shape(spec.name))
            out = np.empty(shape, dtype=spec.dtype)
            buf = self.buffers[spec.name]
            buf.reserve(out.nbytes)
            self.context.set_tensor_address(spec.name, buf.ptr)
            results[spec.name] = out
        if not self.context.execute_async_v3(self.stream.handle):
            raise RuntimeError("IExecutionContext.execute_async_v3 failed (see the TensorRT log)")
        for name, out in results.items():
            self.buffers[name].download(out, self.stream)
        self.stream.synchronize()
        return results
