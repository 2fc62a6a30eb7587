"""Engine.benchmark's GPU clock: the TensorRT runner's CUDA-event timer, on a real GPU, for both CUDA bindings.

No TensorRT engine can run here (see test_trt_runner.py), so the timed work
is the runner's own pinned host-to-device copy on its stream: the same
EventTimer and the same benchmark loop Engine.benchmark uses.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pytest_trt.common.hostprobe import no_gpu_reason

pytestmark = pytest.mark.skipif(no_gpu_reason() is not None, reason=f"needs an NVIDIA GPU: {no_gpu_reason()}")

BINDINGS = [
    pytest.param(name, marks=pytest.mark.skipif(importlib.util.find_spec(module) is None,
                                                reason=f"{name} is not installed"))
    for name, module in (("pycuda", "pycuda"), ("cuda-python", "cuda"))
]


class CopyRunner:
    """Stages the input in pinned memory and copies it to the device on the runner's stream."""

    def __init__(self, api):
        from pytest_trt.backends.trt_runner import EventTimer

        self.api, self.stream = api, api.stream()
        self.host, self.device = api.host_buffer(), api.device_buffer()
        self._timer = EventTimer(api, self.stream)

    def timer(self):
        return self._timer

    def run(self, feeds):
        x = feeds["x"]
        staged = self.host.array(x.shape, x.dtype)
        np.copyto(staged, x)
        self.device.upload(staged, self.stream)
        self.stream.synchronize()
        return {}


@pytest.mark.parametrize("binding", BINDINGS)
def test_benchmark_uses_cuda_events_on_a_gpu_runner(binding):
    from pytest_trt.backends import cudaapi
    from pytest_trt.engines.benchmark import benchmark

    api = cudaapi.load(binding)
    runner = CopyRunner(api)
    small = benchmark(runner.run, runner, {"x": np.ones((4, 1 << 20), np.uint8)}, warmup=2, iterations=10, rounds=2)
    big = benchmark(runner.run, runner, {"x": np.ones((64, 1 << 20), np.uint8)}, warmup=2, iterations=10, rounds=2)
    for r in (small, big):
        assert r.clock == "cuda-events" and r.cpu_rounds == () and r.iterations == 20
        assert 0 < r.median_ms <= r.p90_ms <= r.p99_ms
    gib_s = 64 / 1024 / (big.median_ms / 1e3)
    print(f"{binding}: 64 MiB pinned H2D median {big.median_ms:.3f} ms ({gib_s:.1f} GiB/s), "
          f"4 MiB {small.median_ms:.3f} ms, throughput {big.throughput:.1f} samples/s, spread {big.spread:.1%}")
    assert 1.0 < gib_s < 1000.0  # a real copy over PCIe / NVLink-C2C, not a no-op
    assert big.median_ms > 4 * small.median_ms  # 16x the bytes: far more time (launch overhead aside)
    close = getattr(api, "close", None)
    if close is not None:
        close()
