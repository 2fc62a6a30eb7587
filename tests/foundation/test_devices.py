"""One GPU per pytest-xdist worker: round-robin assignment, pinning, the header map (fake device lists, no GPU)."""

from __future__ import annotations

import pytest

from pytest_trt.common import hostprobe as device
from pytest_trt.options import DEVICES
from pytest_trt.pytest_plugin import devices as dev
from tests.conftest import install_fake_nvidia_smi

#: what a fake nvidia-smi prints for --query-gpu=index,name,compute_cap,memory.total,driver_version,uuid
SMI_LINES = ["0, NVIDIA A100-SXM4-80GB, 8.0, 81920, 580.10, GPU-aaaa1111", "1, NVIDIA H100 80GB HBM3, 9.0, 81559, 580.10, GPU-bbbb2222"]


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """A fake nvidia-smi first on PATH listing an A100 (0) and an H100 (1); inherited by subprocesses."""
    exe = install_fake_nvidia_smi(tmp_path, monkeypatch, "".join(f"echo '{line}'\n" for line in SMI_LINES))
    yield exe
    device.clear()


def test_gpus_follow_cuda_visible_devices(fake_smi, monkeypatch):
    assert [g.name for g in device.gpus()] == ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    device.clear()
    (h100,) = device.gpus()
    assert (h100.index, h100.compute_capability, h100.uuid) == (1, "9.0", "GPU-bbbb2222")
    found = tuple(device.Gpu(i, n, "8.0", None, None, u)
                  for i, n, u in ((0, "a", "GPU-aa"), (1, "b", "GPU-bb")))
    assert [g.name for g in device.visible(found, "GPU-bb,0")] == ["b", "a"]
    assert [g.name for g in device.visible(found, "1,7,0")] == ["b"]  # CUDA stops at the first unknown id
    assert device.visible(found, "") == ()


def test_round_robin_over_the_devices():
    assert dev.worker_map(5, ("0", "1")) == [("gw0", "0"), ("gw1", "1"), ("gw2", "0"), ("gw3", "1"), ("gw4", "0")]
    assert dev.worker_map(2, ("3",)) == [("gw0", "3"), ("gw1", "3")]
    assert dev.worker_index("gw12") == 12 and dev.worker_index(None) is None and dev.worker_index("master") is None


def test_visible_devices_follow_cuda_visible_devices():
    assert dev.visible_devices({}, 4) == ("0", "1", "2", "3")
    assert dev.visible_devices({"CUDA_VISIBLE_DEVICES": "2,3"}, 4) == ("2", "3")
    assert dev.visible_devices({"CUDA_VISIBLE_DEVICES": ""}, 4) == ()


@pytest.mark.parametrize(("text", "error"), [
    ("0,x", "bad: x"), ("", "the list is empty"), ("1,1", "a device is listed twice"),
])
def test_bad_device_lists_are_refused(text, error):
    with pytest.raises(ValueError, match=error):
        dev.parse_devices(text)
    assert dev.parse_devices(" 0, GPU-1a2b ") == ("0", "GPU-1a2b")


def test_pin_sets_the_variable_and_forgets_the_gpu_list():
    env: dict[str, str] = {"CUDA_VISIBLE_DEVICES": "0,1"}
    dev.pin("1", env)
    assert env == {"CUDA_VISIBLE_DEVICES": "1"}


def test_each_worker_sees_only_its_device(pytester, fake_smi, monkeypatch):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_probe="""
import os, pathlib
from pytest_trt.common.hostprobe import gpus

def test_a(trt_device):
    out = pathlib.Path(os.environ["PROBE_DIR"]) / os.environ["PYTEST_XDIST_WORKER"]
    out.write_text(f"{trt_device} {os.environ['CUDA_VISIBLE_DEVICES']} {[g.name for g in gpus()]}")
""")
    probe = pytester.mkdir("probe")
    monkeypatch.setenv("PROBE_DIR", str(probe))
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "each", DEVICES, "1,0", "-p", "no:cacheprovider")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"pytest-trt: workers pinned round-robin over GPUs 1,0 ({DEVICES}): "
                                 f"gw0 -> GPU 1, gw1 -> GPU 0, gw2 -> GPU 1"])
    h100, a100 = "['NVIDIA H100 80GB HBM3']", "['NVIDIA A100-SXM4-80GB']"
    assert {p.name: p.read_text() for p in probe.iterdir()} == {
        "gw0": f"1 1 {h100}", "gw1": f"0 0 {a100}", "gw2": f"1 1 {h100}"}


def test_default_devices_come_from_nvidia_smi(pytester, fake_smi):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_one="def test_one(trt_device):\n    assert trt_device in ('0', '1')\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pytest-trt: workers pinned round-robin over GPUs 0,1 (nvidia-smi): "
                                 "gw0 -> GPU 0, gw1 -> GPU 1"])


def test_one_process_with_a_device_list_takes_the_first(pytester):
    pytester.makepyfile(test_one="""
import os

def test_one(trt_device):
    assert trt_device == "5" and os.environ["CUDA_VISIBLE_DEVICES"] == "5"
""")
    result = pytester.runpytest_subprocess(DEVICES, "5,6", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"pytest-trt: tests run on GPU 5 ({DEVICES}; one process)"])


def test_bad_option_is_a_usage_error(pytester):
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest(DEVICES, "0,zero")  # refused before anything is pinned
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{DEVICES} '0,zero': expected a comma-separated list of GPU indices*bad: zero*"])
