"""The plugin's own probing of the builder never enters the captured build log (the audit evidence)."""

from __future__ import annotations

import pytest

from pytest_trt import BuildConfig, Profile, UnsupportedOption
from pytest_trt.buildlog import assertions
from tests.conftest import needs_rtx

pytestmark = needs_rtx

#: the pin of examples/test_mobilenet.py (MNV2_DYNAMIC), plus every setting the backend reads back
EXAMPLE_PIN = dict(
    name="mobilenet_v2",
    version="1.0.0",
    precision="fp32",
    profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32)))],
    builder_optimization_level=3,
    memory_pool_limits={"workspace": "1GiB"},
)


@pytest.fixture(scope="module")
def rtx():
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return TensorRTBackend("tensorrt_rtx")


@pytest.mark.parametrize("extra", [{}, {"hardware_compatibility_level": "NONE", "compute_capabilities": ["SM89"]}])
def test_example_build_log_has_no_line_caused_by_the_plugin(rtx, models, extra):
    # A clean model built by a bare tensorrt_rtx builder logs no WARNING or ERROR at all; every such
    # line in our capture would be one the plugin caused (e.g. reading hardware_compatibility_level
    # logs "getHardwareCompatibilityLevel() is unsupported in TensorRT-RTX" + INTERNAL_ERROR).
    result = rtx.build(BuildConfig(onnx=models["mobilenet_v2"], **EXAMPLE_PIN, **extra))
    noisy = [f"[{e.severity}] {e.text}" for e in result.log if e.severity not in ("VERBOSE", "INFO")]
    assert noisy == []
    assert not any("unsupported" in e.text or "Thread context" in e.text for e in result.log)
    record = rtx.record(result, BuildConfig(onnx=models["mobilenet_v2"], **EXAMPLE_PIN, **extra))
    assertions.assert_no_warning(record, "unsupported")
    assertions.assert_no_warning(record, "re:.")
    assert "hardware_compatibility_level" not in result.effective_config  # not read back where unsupported


def test_hardware_compatibility_levels_other_than_none_are_refused_on_rtx(rtx, models):
    cfg = BuildConfig(onnx=models["mobilenet_v2"], **{**EXAMPLE_PIN, "hardware_compatibility_level": "AMPERE_PLUS"})
    with pytest.raises(UnsupportedOption, match=r"hardware_compatibility_level: TensorRT-RTX [0-9.]+ has no hardware-compatibility"):
        rtx.build(cfg)
