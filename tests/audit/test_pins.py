"""Version pins: parsing, comparison, and the session failing early."""

from __future__ import annotations

import pytest

from pytest_trt.audit.pins import Pins, PinsError, check_pins
from tests.conftest import RTX_VERSION, needs_rtx

ENV = {
    "backend": {"name": "tensorrt-rtx", "version": "1.7.1.116"},
    "cuda": {"runtime": None, "driver": None},
    "gpus": [],
    "cpu": {"model": "AMD EPYC"},
    "python": {"version": "3.11.7"},
    "pip_freeze": ["numpy==2.4.6", "onnx==1.23.2"],
}


def _pins(tmp_path, text: str) -> Pins:
    path = tmp_path / "pins.toml"
    path.write_text(text)
    return Pins.load(path)


def test_matching_pins_pass(tmp_path):
    pins = _pins(tmp_path, 'backend = "tensorrt-rtx"\nbackend_version = ["1.7.*"]\ncuda_version = "none"\n'
                           'device = ["NVIDIA H200", "cpu"]\npython = "3.11.*"\n[packages]\nnumpy = "2.*"\n')
    assert check_pins(pins, ENV) == []


def test_every_difference_is_listed(tmp_path):
    pins = _pins(tmp_path, 'backend = ["tensorrt"]\nbackend_version = "10.13.*"\ncuda_version = "12.*"\n'
                           'driver_version = "570.*"\ndevice = "NVIDIA H200"\n[packages]\nonnx = "1.17.*"\nh5py = "3.*"\n')
    assert check_pins(pins, ENV) == [
        "backend: found tensorrt-rtx, pinned tensorrt",
        "backend_version: found 1.7.1.116, pinned 10.13.*",
        "cuda_version: found none, pinned 12.*",
        "driver_version: found none, pinned 570.*",
        "device: found cpu (AMD EPYC), no GPU; pinned NVIDIA H200",
        "packages.h5py: found none, pinned 3.*",
        "packages.onnx: found 1.23.2, pinned 1.17.*",
    ]


def test_gpu_names_are_matched(tmp_path):
    env = {**ENV, "gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA A100-SXM4-80GB"}]}
    pins = _pins(tmp_path, 'device = ["NVIDIA H*"]\n')
    assert check_pins(pins, env) == ["device: found NVIDIA A100-SXM4-80GB, pinned NVIDIA H*"]


@pytest.mark.parametrize(("text", "message"), [
    ('backend_verison = "1.7.*"\n', "unknown key"),
    ('policy = "ignore"\n', "policy must be one of fail, warn"),
    ("backend = 17\n", "must be a string or a non-empty list"),
    ("backend = [\n", "not valid TOML"),
])
def test_bad_pins_files(tmp_path, text, message):
    with pytest.raises(PinsError, match=message):
        _pins(tmp_path, text)


SUITE = """
def test_never_runs(tmp_path_factory):
    open({marker!r}, "w").write("ran")
"""


@needs_rtx
def test_mismatch_fails_the_session_before_any_test(pytester):
    marker = pytester.path / "ran.txt"
    pytester.makepyfile(test_x=SUITE.format(marker=str(marker)))
    pytester.path.joinpath("pins.toml").write_text('backend_version = "1.6.*"\ncuda_version = "12.*"\ndevice = "NVIDIA H200"\n')
    result = pytester.runpytest_subprocess("--trt-backend", "tensorrt-rtx",
                                           "--trt-pins", "pins.toml", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: environment does not match the version pins in *pins.toml (3 differences):",
        f"  backend_version: found {RTX_VERSION}, pinned 1.6.*",
        "  cuda_version: found none, pinned 12.*",
        "  device: found cpu (*), no GPU; pinned NVIDIA H200",
        "review the upgrade and update the pins file, or set policy = \"warn\" there",
    ])
    assert not marker.exists()


@needs_rtx
def test_warn_policy_warns_and_runs(pytester):
    marker = pytester.path / "ran.txt"
    pytester.makepyfile(test_x=SUITE.format(marker=str(marker)))
    pytester.makeini("[pytest]\ntrt_pins = pins.toml\n")
    pytester.path.joinpath("pins.toml").write_text('policy = "warn"\nbackend_version = "1.6.*"\n')
    result = pytester.runpytest_subprocess("--trt-backend", "tensorrt-rtx",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*environment does not match the version pins*", f"*backend_version: found {RTX_VERSION}*"])
    assert marker.exists()
