"""The plugin's own probing of the builder never enters the captured build log (the audit evidence)."""

from __future__ import annotations

import pytest

from pytest_trt import BuildConfig, Profile, UnsupportedOption
from pytest_trt.buildlog import assertions
from tests.conftest import RTX_MM, RTX_VERSION, needs_rtx

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


NOISE = """
import json, sys
import tensorrt_rtx as trt
from pytest_trt import BuildConfig, Profile

onnx, mode, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if mode == "bare":  # the same build by a bare tensorrt_rtx builder: what the backend itself says
    class Capture(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.lines = []

        def log(self, severity, msg):
            if severity not in (trt.ILogger.Severity.VERBOSE, trt.ILogger.Severity.INFO):
                self.lines.append(msg)

    logger = Capture()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse_from_file(onnx)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("input", (1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32))
    config.add_optimization_profile(profile)
    assert builder.build_serialized_network(network, config) is not None
    noisy = logger.lines
else:
    from pytest_trt.backends.tensorrt import TensorRTBackend

    pin = dict(name="mobilenet_v2", version="1.0.0", precision="fp32", builder_optimization_level=3,
               profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32)))],
               memory_pool_limits={"workspace": "1GiB"})
    result = TensorRTBackend("tensorrt_rtx").build_config(BuildConfig(onnx=onnx, **pin, **extra))
    noisy = [e.text for e in result.log if e.severity not in ("VERBOSE", "INFO")]
print(json.dumps(noisy))
"""


def _noise(onnx_path, mode: str, extra: dict) -> list[str]:
    """WARNING/ERROR lines of one build in a fresh process: TensorRT's logger is process-wide, and a builder or
    runtime another test left alive makes TensorRT warn that a second logger is ignored."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", NOISE, str(onnx_path), mode, json.dumps(extra)], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("extra", [{}, {"hardware_compatibility_level": "NONE", "compute_capabilities": ["SM89"]}])
def test_example_build_log_has_no_line_caused_by_the_plugin(rtx, models, extra):
    # Every WARNING/ERROR line beyond what a bare builder logs for the same model is one the plugin caused
    # (e.g. reading hardware_compatibility_level logs "getHardwareCompatibilityLevel() is unsupported in
    # TensorRT-RTX" + an INTERNAL_ERROR). TensorRT-RTX 1.7 logs none; 1.4 warns "In JIT build, strongly
    # typed is enabled by default." itself.
    bare = _noise(models["mobilenet_v2"], "bare", {})
    assert _noise(models["mobilenet_v2"], "plugin", extra) == bare
    if RTX_MM == "1.7":
        assert bare == []
    result = rtx.build_config(BuildConfig(onnx=models["mobilenet_v2"], **EXAMPLE_PIN, **extra))
    assert not any("unsupported" in e.text or "Thread context" in e.text for e in result.log)
    record = rtx.record(result, BuildConfig(onnx=models["mobilenet_v2"], **EXAMPLE_PIN, **extra))
    assertions.assert_no_warning(record, "unsupported")
    assert "hardware_compatibility_level" not in result.effective_config  # not read back where unsupported


def test_hardware_compatibility_levels_other_than_none_are_refused_on_rtx(rtx, models):
    cfg = BuildConfig(onnx=models["mobilenet_v2"], **{**EXAMPLE_PIN, "hardware_compatibility_level": "AMPERE_PLUS"})
    with pytest.raises(UnsupportedOption, match=r"hardware_compatibility_level: TensorRT-RTX [0-9.]+ has no hardware-compatibility"):
        rtx.build_config(cfg)


def _relu_model(path, *, ir: int, opset: int):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.x", 1)])
    model.ir_version = ir
    onnx.save(model, path)
    return path


@pytest.mark.parametrize(("ir", "opset"), [(99, 17), (8, 99), ("max+1", 17), (8, "max+1")])
def test_onnx_newer_than_the_parser_is_refused_with_both_numbers(rtx, tmp_path, ir, opset):
    # TensorRT-RTX 1.7 itself parses IR 99 / opset 99 and builds an engine without a word.
    from pytest_trt import BuildFailed
    from pytest_trt.backends.onnx_limits import limits_for

    row = limits_for("tensorrt_rtx", RTX_VERSION)
    ir = row.max_ir + 1 if ir == "max+1" else ir
    opset = row.max_opset + 1 if opset == "max+1" else opset
    model = _relu_model(tmp_path / "new.onnx", ir=ir, opset=opset)
    with pytest.raises(BuildFailed) as info:
        rtx.build_config(BuildConfig(name="new", onnx=model))
    msg = str(info.value)
    assert f"new.onnx declares ONNX IR version {ir} and opset {opset}" in msg
    assert f"parses IR version <= {row.max_ir} and opset <= {row.max_opset}" in msg and "opset_version" in msg
    assert info.value.stage == "parse"


def test_onnx_at_the_parser_limit_builds(rtx, tmp_path):
    from pytest_trt.backends.onnx_limits import ONNX_LIMITS

    if ("tensorrt_rtx", RTX_MM) not in ONNX_LIMITS:
        pytest.skip(f"no ONNX limits row for tensorrt_rtx {RTX_MM}: bounded by the onnx package instead")
    row = ONNX_LIMITS[("tensorrt_rtx", RTX_MM)]
    # fixed: read from each parser library's embedded ONNX proto by hand
    assert (row.max_ir, row.max_opset) == {"1.7": (12, 24), "1.4": (11, 23)}[RTX_MM]
    model = _relu_model(tmp_path / "ok.onnx", ir=row.max_ir, opset=row.max_opset)
    assert rtx.build_config(BuildConfig(name="ok", onnx=model)).engine


def test_header_reader_agrees_with_onnx(models, tmp_path):
    import onnx

    from pytest_trt.backends.onnx_limits import OnnxHeader, read_header

    paths = [*models.values(), _relu_model(tmp_path / "r.onnx", ir=11, opset=23)]
    for path in paths:
        m = onnx.load(path, load_external_data=False)
        opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        assert read_header(path) == OnnxHeader(m.ir_version, opset)
    (tmp_path / "junk.onnx").write_bytes(b"\xff\xff\xff")
    assert read_header(tmp_path / "junk.onnx") is None
