"""Two pytest-xdist workers on a machine with two GPUs: each sees only its own GPU (CUDA, not just the variable).

Skips with the reason on machines with fewer than two GPUs or no CUDA binding.
"""

from __future__ import annotations

import json

import pytest

from pytest_trt.backends import cudaapi
from pytest_trt.common.hostprobe import gpus, no_gpu_reason
from pytest_trt.options import DEVICES

pytestmark = [
    pytest.mark.skipif(no_gpu_reason() is not None, reason=f"needs NVIDIA GPUs: {no_gpu_reason()}"),
    pytest.mark.skipif(len(gpus()) < 2, reason=f"needs two GPUs; this machine has {len(gpus())}"),
    pytest.mark.skipif(not cudaapi.available(), reason="needs pycuda or cuda-python"),
]

PROBE = """
import json, os, pathlib
from pytest_trt.backends import cudaapi
from pytest_trt.common.hostprobe import gpus

def test_probe(trt_device):
    api = cudaapi.load()
    stream, buf = api.stream(), api.device_buffer(1 << 20)  # real work on the pinned GPU
    seen = {"trt_device": trt_device, "env": os.environ["CUDA_VISIBLE_DEVICES"], "cuda_count": api.device_count(),
            "gpus": [[g.index, g.uuid] for g in gpus()], "binding": api.name}
    out = pathlib.Path(os.environ["PROBE_DIR"]) / (os.environ["PYTEST_XDIST_WORKER"] + ".json")
    out.write_text(json.dumps(seen))
"""


@pytest.mark.parametrize("devices", [None, "1,0"])
def test_each_worker_uses_its_own_gpu(pytester, monkeypatch, devices):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_probe=PROBE)
    probe = pytester.mkdir("probe")
    monkeypatch.setenv("PROBE_DIR", str(probe))
    args = ["-n", "2", "--dist", "each", "-p", "no:cacheprovider"] + ([DEVICES, devices] if devices else [])
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0, result.stdout.str()
    order = devices.split(",") if devices else ["0", "1"]
    result.stdout.fnmatch_lines([f"pytest-trt: workers pinned round-robin over GPUs {','.join(order)} (*): "
                                 f"gw0 -> GPU {order[0]}, gw1 -> GPU {order[1]}"])
    seen = {p.stem: json.loads(p.read_text()) for p in probe.iterdir()}
    print(json.dumps(seen, indent=1))
    for worker, device in (("gw0", order[0]), ("gw1", order[1])):
        s = seen[worker]
        assert (s["trt_device"], s["env"], s["cuda_count"]) == (device, device, 1)
        assert [g[0] for g in s["gpus"]] == [int(device)]
    assert seen["gw0"]["gpus"][0][1] != seen["gw1"]["gpus"][0][1]  # two different physical GPUs (UUIDs)
