"""Shared fixtures for pytest-trt's own tests: example models and backend availability."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
HAS_TRT = importlib.util.find_spec("tensorrt") is not None
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None

needs_rtx = pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
needs_trt = pytest.mark.skipif(
    not HAS_TRT,
    reason="NVIDIA TensorRT (module tensorrt) is not installed: its PyPI wheels download their libraries from "
    "NVIDIA's own index, unreachable here; the shared code path is tested through tensorrt_rtx",
)
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example ONNX models, written once per session."""
    from examples.models import write_all

    return write_all(tmp_path_factory.mktemp("models"))
