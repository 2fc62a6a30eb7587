"""One host probe: nvidia-smi runs once per process for GPUs and once for the CUDA banner, whoever asks
(backends, report header, environment capture); /proc/cpuinfo is read once (a fake nvidia-smi, no GPU)."""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_trt.audit.environment import capture_environment
from pytest_trt.common import hostprobe
from tests.conftest import install_fake_nvidia_smi

QUERY_LINES = [
    "0, NVIDIA A100-SXM4-80GB, 8.0, 81920, 580.10, GPU-aaaa1111, 00000000:07:00.0",
    "1, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.10, GPU-bbbb2222, 00000000:0A:00.0",
]
BANNER = "| NVIDIA-SMI 580.10    Driver Version: 580.10    CUDA Version: 13.0 |"


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fake nvidia-smi first on PATH; every call appends its first argument to calls.txt."""
    calls = tmp_path / "calls.txt"
    install_fake_nvidia_smi(
        tmp_path, monkeypatch,
        f"echo \"${{1:-banner}}\" >> {calls}\n"
        'case "$1" in --query-gpu=*) '
        + "".join(f"echo '{line}'; " for line in QUERY_LINES)
        + f";; *) echo '{BANNER}';; esac\n",
    )
    yield calls
    hostprobe.clear()


def test_gpus_are_probed_once_for_everyone(fake_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (a100, h100) = hostprobe.all_gpus()
    assert (a100.name, a100.compute_capability, a100.memory_mib, a100.driver, a100.uuid, a100.pci_bus_id) == (
        "NVIDIA A100-SXM4-80GB", "8.0", 81920, "580.10", "GPU-aaaa1111", "00000000:07:00.0")
    assert h100.sm == "SM90"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [g.name for g in hostprobe.gpus()] == ["NVIDIA H100 80GB HBM3"]  # filtered without a new probe
    assert hostprobe.no_gpu_reason() is None
    env = capture_environment(backend="tensorrt-rtx")
    assert [g["pci_bus_id"] for g in env["gpus"]] == ["00000000:07:00.0", "00000000:0A:00.0"]  # the machine's
    assert env["gpus"][1] == {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                              "memory_total_mib": 81559, "driver_version": "580.10", "pci_bus_id": "00000000:0A:00.0"}
    assert env["cuda"]["driver_cuda"] == "13.0" and env["cuda"]["driver"] == "580.10"
    capture_environment(backend="onnxruntime")
    calls = fake_smi.read_text().split()
    assert calls.count("banner") == 1 and len([c for c in calls if c.startswith("--query-gpu=")]) == 1, calls


def test_no_driver_is_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    hostprobe.clear()
    try:
        assert hostprobe.gpus() == () and hostprobe.all_gpus() == ()
        assert hostprobe.no_gpu_reason() == "no NVIDIA driver on this machine (nvidia-smi not found)"
        assert hostprobe.cuda_versions().driver_cuda is None
    finally:
        hostprobe.clear()


def test_cpu_is_read_from_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    cpu = hostprobe.cpu()
    assert cpu.model == (model.group(1).strip() if model else (platform.processor() or None))
    assert cpu.machine == platform.machine() and cpu.count == os.cpu_count()
    expected_isa = [f for f in hostprobe.ISA_FLAGS if flags and f in flags.group(1).split()]
    assert cpu.isa == expected_isa
    assert capture_environment()["cpu"] == {"model": cpu.model, "count": os.cpu_count(), "machine": cpu.machine}
