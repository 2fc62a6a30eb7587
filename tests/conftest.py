"""Shared fixtures for pytest-trt's own tests: example models and backend availability."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
HAS_TRT = importlib.util.find_spec("tensorrt") is not None
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None

def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


#: the installed TensorRT-RTX ("1.7.1.116") and its major.minor ("1.7"): tests run on the tox axis 1.4 / 1.7
RTX_VERSION = _dist_version("tensorrt-rtx")
RTX_MM = ".".join(RTX_VERSION.split(".")[:2])

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


def install_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """Put an executable ``nvidia-smi`` running ``script`` (sh) first on PATH, inherited by subprocesses.

    CUDA_VISIBLE_DEVICES is unset and the host probe's memo cleared, so the next probe runs the fake;
    clear it again (``hostprobe.clear()``) after the test.
    """
    import os
    import stat

    from pytest_trt.common import hostprobe

    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hostprobe.clear()
    return exe
