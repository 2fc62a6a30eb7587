"""Real TensorRT-RTX builds on the CPU through the shared TensorRT-family backend."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trt import BuildConfig, BuildFailed, ConfigError, Profile, UnsupportedOption
from pytest_trt.artifact import BuildResult
from tests.conftest import RTX_MM, needs_rtx, needs_trt

pytestmark = needs_rtx

DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))


@pytest.fixture(scope="module")
def rtx():
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return TensorRTBackend("tensorrt_rtx")


def test_build_captures_every_message_and_effective_config(rtx, models, tmp_path):
    cfg = BuildConfig(
        name="cbr",
        onnx=models["conv_bn_relu"],
        profiles=[DYN],
        builder_optimization_level=2,
        memory_pool_limits={"workspace": "256MiB"},
        flags=["STRICT_NANS"],
    )
    result = rtx.build_config(cfg)
    # plan magic read from tensorrt_rtx 1.7.1 plans by hand; other releases: only the size is known
    if RTX_MM == "1.7":
        assert result.engine[:4] == b"vtrt"
    assert len(result.engine) > 10_000
    severities = {e.severity for e in result.log}
    assert {"VERBOSE", "INFO"} <= severities
    assert any(e.text.startswith("Layers:") and "[ONNX Layer: relu1]" in e.text for e in result.log)
    times = [e.time for e in result.log]
    assert times == sorted(times) and times[0] >= 0
    eff = result.effective_config
    assert eff["flags"] == ["STRICT_NANS"]  # TF32, on by default in TensorRT, is cleared for precision fp32
    assert eff["builder_optimization_level"] == 2
    assert eff["memory_pool_limits"] == {"workspace": 256 << 20}
    assert eff["profiling_verbosity"] == "DETAILED"
    assert eff["profiles"] == [{"input": [[1, 3, 16, 16], [2, 3, 16, 16], [4, 3, 16, 16]]}]
    assert eff["strongly_typed"] is True
    assert result.device["kind"] in ("cpu-aot", "gpu") and result.device["targets"] == ["default"]
    assert result.versions["tensorrt_rtx"] == rtx.version()
    assert result.config_hash == cfg.config_hash
    # the artifact folder round-trips every message, multi-line ones included
    result.write(tmp_path / "a")
    text = (tmp_path / "a" / "build.log").read_text(encoding="utf-8")
    assert text.count("\n") == sum(e.text.count("\n") + 1 for e in result.log)
    assert text.startswith(f"[{result.log[0].severity}] ")
    back = BuildResult.read(tmp_path / "a")
    assert back == result
    assert json.loads((tmp_path / "a" / "config.json").read_text())["effective"] == eff


def test_builds_are_byte_identical(rtx, models):
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    assert rtx.build_config(cfg).engine == rtx.build_config(cfg).engine


def test_tf32_precision_and_compute_capability_targets(rtx, models):
    cfg = BuildConfig(
        name="cbr",
        onnx=models["conv_bn_relu"],
        profiles=[DYN],
        precision="tf32",
        compute_capabilities=["SM89", "SM120"],
        hardware_compatibility_level="NONE",
    )
    result = rtx.build_config(cfg)
    assert result.effective_config["flags"] == ["TF32"]
    assert result.effective_config["compute_capabilities"] == ["SM120", "SM89"]
    assert result.device["targets"] == ["SM120", "SM89"]


@pytest.mark.parametrize("precision", ["fp16", "int8", "bf16", "best"])
def test_precision_flags_are_refused_on_strongly_typed_rtx(rtx, models, precision):
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN], precision=precision)
    with pytest.raises(UnsupportedOption) as info:
        rtx.build_config(cfg)
    msg = str(info.value)
    assert f"precision={precision!r}" in msg and "strongly typed" in msg and "precision='typed'" in msg


def test_flag_the_backend_lacks_is_refused(rtx, models):
    # ENABLE_TACTIC_HEURISTIC is a TensorRT 8.6 flag no TensorRT-RTX release has
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN], flags=["SPARSE_WEIGHTS", "ENABLE_TACTIC_HEURISTIC"])
    with pytest.raises(UnsupportedOption, match="has no builder flag ENABLE_TACTIC_HEURISTIC; it has: .*STRICT_NANS") as info:
        rtx.build_config(cfg)
    assert "FP16" not in str(info.value)  # only flags a build would accept are offered


def test_precision_flags_are_refused_even_where_the_enum_still_lists_them(rtx, models):
    # TensorRT-RTX 1.4 lists OBEY_PRECISION_CONSTRAINTS but fails the build with it; 1.7 dropped it
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN], flags=["OBEY_PRECISION_CONSTRAINTS"])
    with pytest.raises(UnsupportedOption, match=r"flags\['OBEY_PRECISION_CONSTRAINTS'\]: TensorRT-RTX .* (has no builder flag|refuses)"):
        rtx.build_config(cfg)


def test_unknown_compute_capability_and_ort_options_are_refused(rtx, models):
    from pytest_trt import OrtOptions

    with pytest.raises(UnsupportedOption, match=r"compute_capabilities\['SM90'\].*targets one of .*SM89"):
        rtx.build_config(BuildConfig(name="c", onnx=models["conv_bn_relu"], profiles=[DYN], compute_capabilities=["SM90"]))
    with pytest.raises(UnsupportedOption, match="ONNX Runtime options do not apply"):
        rtx.build_config(BuildConfig(name="c", onnx=models["conv_bn_relu"], profiles=[DYN], ort=OrtOptions()))


def test_bytes_that_are_not_onnx_fail_with_the_parser_message(rtx, tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"this is not a protobuf \x00\x01\x02")
    with pytest.raises(BuildFailed) as info:
        rtx.build_config(BuildConfig(name="garbage", onnx=bad))
    err = info.value
    assert err.stage == "parse" and "garbage.onnx" in str(err)
    assert "holds no ONNX graph" in str(err) and "onnx.checker.check_model" in str(err)
    assert err.context["log"], "the log of the failed parse is kept"


def test_truncated_protobuf_fails_in_the_parser(rtx, models, tmp_path):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(models["conv_bn_relu"].read_bytes()[:200])
    with pytest.raises(BuildFailed) as info:
        rtx.build_config(BuildConfig(name="truncated", onnx=bad))
    assert info.value.stage == "parse" and "truncated.onnx" in str(info.value)


def _model_with_custom_op(path):
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [
        helper.make_node("Relu", ["input"], ["r"], name="relu_ok"),
        helper.make_node("FancyNorm", ["r"], ["y"], name="my_fancy_norm", domain="com.example"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
        ir_version=8,  # helper's default is the onnx package's newest IR, newer than the parser's
    )
    onnx.save(model, path)
    return path


def test_unparsable_op_names_the_node_and_keeps_the_log(rtx, tmp_path):
    path = _model_with_custom_op(tmp_path / "custom.onnx")
    with pytest.raises(BuildFailed) as info:
        rtx.build_config(BuildConfig(name="custom", onnx=path))
    msg = str(info.value)
    assert "node 'my_fancy_norm' (FancyNorm)" in msg
    assert "FancyNorm" in msg and "custom.onnx" in msg
    assert info.value.context["nodes"] == ("my_fancy_norm",)
    assert any("relu_ok" in e.text for e in info.value.context["log"])


@pytest.mark.parametrize(
    ("profile", "text"),
    [
        (
            Profile(image=((1, 3, 16, 16), (1, 3, 16, 16), (1, 3, 16, 16))),
            "names input 'image', which the network does not have; its inputs are: input [-1, 3, 16, 16]",
        ),
        (Profile(input=((1, 3, 16), (1, 3, 16), (1, 3, 16))), "has rank 3, the network's has rank 4"),
        (Profile(input=((1, 4, 16, 16), (1, 4, 16, 16), (1, 4, 16, 16))), "axis 1 is fixed at 3"),
    ],
)
def test_profiles_that_do_not_fit_the_network(rtx, models, profile, text):
    with pytest.raises(ConfigError) as info:
        rtx.build_config(BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[profile]))
    assert text in str(info.value)


def test_dynamic_input_without_profile_says_what_to_add(rtx, models):
    with pytest.raises(ConfigError, match=r"input 'input' has dynamic shape \[-1, 3, 16, 16\]; add profiles=\[Profile"):
        rtx.build_config(BuildConfig(name="cbr", onnx=models["conv_bn_relu"]))


def test_timing_cache_is_refused_where_it_is_a_no_op(rtx, models, tmp_path):
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN], timing_cache=tmp_path / "t.cache")
    with pytest.raises(UnsupportedOption, match="timing_cache: TensorRT-RTX .* no-ops in 1.2"):
        rtx.build_config(cfg)
    assert not (tmp_path / "t.cache").exists()


def test_logger_never_raises(rtx):
    from pytest_trt.backends.trt_logger import capture_logger

    logger = capture_logger(rtx.trt)
    logger.start()

    class Unprintable:
        def __str__(self):
            raise RuntimeError("boom")

    logger.log(rtx.trt.ILogger.Severity.INFO, Unprintable())
    logger.log(rtx.trt.ILogger.Severity.WARNING, "kept")
    entries = logger.stop()
    assert [(e.severity, e.text) for e in entries] == [
        ("INFO", "<message not convertible to text: RuntimeError>"),
        ("WARNING", "kept"),
    ]
    logger.log(rtx.trt.ILogger.Severity.INFO, "after stop: no sink, ignored")
    assert capture_logger(rtx.trt) is logger  # one logger per process: TensorRT keeps a global one


def test_engines_cannot_run_without_a_supported_gpu(rtx, models):
    from pytest_trt.errors import EngineNotRunnable

    reason = rtx.not_runnable_reason()
    if reason is None:
        pytest.skip("a GPU TensorRT-RTX supports is present")
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    result = rtx.build_config(cfg)
    with pytest.raises(EngineNotRunnable, match="cannot run tensorrt-rtx engine 'cbr' here: "):
        rtx.runner(result, cfg)
    import contextvars

    import numpy as np

    from pytest_trt.engines.engine import Engine

    engine = Engine(cfg, result, rtx)
    feeds = {"input": np.zeros((1, 3, 16, 16), np.float32)}
    with pytest.raises(EngineNotRunnable):  # outside a test (a script, the CLI): the error, not a skip
        contextvars.Context().run(engine.run, feeds)
    with pytest.raises(pytest.skip.Exception, match=r"Hint: --trt-backend onnxruntime runs engines on this CPU"):
        engine.run(feeds)  # inside a test: a skip with the backend's reason and the hint


@needs_trt
def test_full_tensorrt_builds_through_the_same_code_path(models):
    from pytest_trt.backends.tensorrt import TensorRTBackend

    backend = TensorRTBackend("tensorrt")
    cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN], precision="fp16")
    result = backend.build_config(cfg)
    assert "FP16" in result.effective_config["flags"]
    assert np.frombuffer(result.engine[:4], dtype=np.uint8).size == 4
