"""The GPU buffer and stream layer the TensorRT runner uses (needs an NVIDIA GPU and cuda-python)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from pytest_trt.common.hostprobe import gpus, no_gpu_reason

pytestmark = [
    pytest.mark.skipif(no_gpu_reason() is not None, reason=f"needs an NVIDIA GPU: {no_gpu_reason()}"),
    pytest.mark.skipif(
        importlib.util.find_spec("cuda") is None, reason="cuda-python is not installed (pip install 'pytest-trt[gpu]')"
    ),
]


def test_gpu_identity_is_read_from_nvidia_smi():
    gpu = gpus()[0]
    assert gpu.name and gpu.compute_capability.count(".") == 1
    assert gpu.sm.startswith("SM") and gpu.memory_mib and gpu.memory_mib > 1000


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64"])
def test_upload_download_round_trip(dtype):
    from pytest_trt.backends.cuda import DeviceBuffer, Stream

    stream = Stream()
    data = (np.arange(3 * 1000 * 17) % 101).astype(dtype).reshape(3, 1000, 17)
    buf = DeviceBuffer()
    buf.upload(data, stream)
    out = buf.download(np.empty_like(data), stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, data)
    buf.free()
    stream.close()


def test_buffer_grows_and_refuses_oversized_downloads():
    from pytest_trt.backends.cuda import DeviceBuffer, Stream

    stream = Stream()
    buf = DeviceBuffer(16)
    small_ptr = buf.ptr
    big = np.ones(1 << 20, dtype=np.float32)
    buf.upload(big, stream)
    assert buf.nbytes == big.nbytes and buf.ptr != 0
    assert small_ptr != 0
    with pytest.raises(ValueError, match="download of 8388608 bytes from a 4194304-byte buffer"):
        buf.download(np.empty(2 << 20, dtype=np.float32), stream)
    stream.synchronize()


def test_non_contiguous_arrays_are_copied_contiguously():
    from pytest_trt.backends.cuda import DeviceBuffer, Stream

    stream = Stream()
    data = np.arange(64, dtype=np.float32).reshape(8, 8).T  # Fortran-ordered view
    buf = DeviceBuffer()
    buf.upload(data, stream)
    out = buf.download(np.empty((8, 8), dtype=np.float32), stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, np.ascontiguousarray(data))


def test_cuda_errors_become_exceptions():
    from pytest_trt.backends.cuda import check, cudart

    rt = cudart()
    with pytest.raises(RuntimeError, match="CUDA call failed: cudaError"):
        check(rt.cudaMalloc(1 << 60))  # far more than any GPU has
