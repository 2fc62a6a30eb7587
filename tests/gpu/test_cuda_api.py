"""The device-buffer interface, once per implementation (pycuda, cuda-python), on a real NVIDIA GPU.

Each test runs for every installed binding; a binding that is not installed
skips with the reason, and everything skips where no GPU exists.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

from pytest_trt.common.hostprobe import no_gpu_reason

pytestmark = pytest.mark.skipif(no_gpu_reason() is not None, reason=f"needs an NVIDIA GPU: {no_gpu_reason()}")

BINDINGS = [
    pytest.param("pycuda", marks=pytest.mark.skipif(importlib.util.find_spec("pycuda") is None,
                                                    reason="pycuda is not installed (pip install 'pytest-trt[pycuda]')")),
    pytest.param("cuda-python", marks=pytest.mark.skipif(importlib.util.find_spec("cuda") is None,
                                                         reason="cuda-python is not installed (pip install "
                                                                "'pytest-trt[gpu]')")),
]


@pytest.fixture(params=BINDINGS)
def api(request):
    from pytest_trt.backends import cudaapi

    impl = cudaapi.load(request.param)
    assert impl.name == request.param
    yield impl
    close = getattr(impl, "close", None)
    if close is not None:
        close()


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int32", "int64", "bool"])
def test_pinned_round_trip(api, dtype):
    stream = api.stream()
    data = (np.arange(4 * 999 * 7) % 97).astype(dtype).reshape(4, 999, 7)
    host_in, host_out = api.host_buffer(), api.host_buffer()
    staged = host_in.array(data.shape, data.dtype)
    np.copyto(staged, data)
    buf = api.device_buffer()
    buf.upload(staged, stream)
    out = host_out.array(data.shape, data.dtype)
    out[...] = 0
    buf.download(out, stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, data)
    buf.free()
    host_in.free()
    host_out.free()
    stream.close()


def test_pinned_buffers_grow_and_keep_views_in_bounds(api):
    host = api.host_buffer()
    small = host.array((4,), np.float32)
    assert small.shape == (4,) and small.flags.writeable
    big = host.array((1 << 20,), np.float64)
    big[-1] = 7.0
    assert big.nbytes == 8 << 20 and big[-1] == 7.0
    host.free()


def test_device_to_device_through_two_buffers_and_pageable_memory(api):
    stream = api.stream()
    data = np.random.default_rng(0).standard_normal((256, 257)).astype(np.float32)
    a, b = api.device_buffer(), api.device_buffer(16)
    a.upload(data, stream)  # pageable source: the driver stages it
    mid = a.download(np.empty_like(data), stream)
    stream.synchronize()
    b.upload(mid * 2, stream)
    stream.synchronize()
    out = b.download(np.empty_like(data), stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, data * 2)
    with pytest.raises(ValueError, match="download of 2 bytes from a 0-byte buffer"):
        api.device_buffer().download(np.empty(2, np.uint8), stream)


def test_events_time_work_on_the_stream(api):
    stream = api.stream()
    data = np.ones(1 << 28, dtype=np.uint8)  # 256 MiB
    host = api.host_buffer()
    staged = host.array(data.shape, data.dtype)
    np.copyto(staged, data)
    buf = api.device_buffer()
    begin, end = api.event(), api.event()
    t0 = time.perf_counter()
    begin.record(stream)
    for _ in range(4):
        buf.upload(staged, stream)
    end.record(stream)
    ms = end.elapsed_ms(begin)
    wall_ms = (time.perf_counter() - t0) * 1e3
    # 1 GiB over PCIe/NVLink-C2C: more than 0.05 ms, and no more than the wall time around it
    assert 0.05 < ms <= wall_ms + 1.0
    print(f"{api.name}: 4 x 256 MiB pinned H2D in {ms:.2f} ms ({4 * 256 / 1024 / (ms / 1e3):.1f} GiB/s)")


def test_failed_calls_raise_the_same_error(api):
    with pytest.raises(RuntimeError, match="CUDA call failed"):
        api.device_buffer(1 << 60)  # far more than any GPU has
    with pytest.raises(RuntimeError, match="CUDA call failed"):
        api.set_device(api.device_count() + 5)


def test_device_count_and_selection(api):
    n = api.device_count()
    assert n >= 1
    api.set_device(n - 1)
    assert api.device == n - 1
