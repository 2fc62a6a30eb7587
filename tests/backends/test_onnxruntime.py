"""The onnxruntime backend: real sessions on small models; build, evidence, validation, failures, cache reload."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trt.artifact import SEVERITIES, BuildResult
from pytest_trt.backends.registry import create_backend
from pytest_trt.config import BuildConfig, Calibration, OrtOptions, Profile
from pytest_trt.errors import BuildFailed, UnsupportedOption
from tests.conftest import needs_ort

pytestmark = needs_ort


@pytest.fixture(scope="module")
def backend():  # type: ignore[no-untyped-def]
    from pytest_trt.backends.onnxruntime import OrtBackend

    return OrtBackend()


@pytest.fixture(scope="module")
def cbr(models: dict[str, Path]) -> BuildConfig:
    return BuildConfig(name="cbr", onnx=models["conv_bn_relu"])


@pytest.fixture(scope="module")
def cbr_result(backend, cbr: BuildConfig) -> BuildResult:  # type: ignore[no-untyped-def]
    return backend.build_config(cbr)


def _fd2() -> tuple[int, int]:
    st = os.fstat(2)
    return st.st_dev, st.st_ino


def test_create_backend_gives_the_ort_backend() -> None:
    b = create_backend("onnxruntime")
    assert type(b).__name__ == "OrtBackend" and b.name == "onnxruntime"


def test_build_result_evidence(backend, cbr: BuildConfig, cbr_result: BuildResult) -> None:  # type: ignore[no-untyped-def]
    r = cbr_result
    assert r.backend == "onnxruntime"
    optimized = onnx.load_from_string(r.engine)  # the engine artifact is the optimized ONNX
    assert len(optimized.graph.node) < 3
    assert r.config == cbr.to_json() and r.config_hash == cbr.config_hash and r.onnx_sha256 == cbr.onnx_sha256
    assert r.effective_config["ort"] == OrtOptions().to_json()
    assert set(r.durations) == {"parse", "build"} and all(v >= 0 for v in r.durations.values())
    import onnxruntime

    assert r.versions["onnxruntime"] == r.versions["backend"] == onnxruntime.__version__
    assert {"onnx", "numpy", "python"} <= set(r.versions)
    assert r.device["kind"] == "cpu" and r.device["name"] and r.device["providers"] == ["CPUExecutionProvider"]
    assert r.device == backend.device(cbr)


def test_engine_bytes_are_reproducible(backend, cbr: BuildConfig, cbr_result: BuildResult) -> None:  # type: ignore[no-untyped-def]
    assert backend.build_config(cbr).engine_sha256 == cbr_result.engine_sha256


def test_build_log_holds_the_transformer_lines(cbr_result: BuildResult) -> None:
    texts = [e.text for e in cbr_result.log]
    # ORT 1.32: BN folding is a rule of Level1_RuleBasedTransformer, then ConvActivationFusion absorbs the Relu
    assert any("GraphTransformer Level1_RuleBasedTransformer modified: 1" in t for t in texts)
    assert any("GraphTransformer ConvActivationFusion modified: 1" in t for t in texts)
    assert any("GraphTransformer ConstantFolding modified: 0" in t for t in texts)  # nothing dropped
    assert any("All nodes placed on [CPUExecutionProvider]" in t for t in texts)
    severities = {e.severity for e in cbr_result.log}
    assert {"VERBOSE", "INFO"} <= severities <= set(SEVERITIES)
    times = [e.time for e in cbr_result.log]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 60
    assert "[INFO] [graph_transformer.cc" in cbr_result.log_text()


def test_build_log_stays_out_of_test_output(backend, cbr: BuildConfig, capfd: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    backend.build_config(cbr)
    out, err = capfd.readouterr()
    assert "onnxruntime" not in err and "GraphTransformer" not in out + err


def test_every_level_is_applied_and_read_back(backend, models: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    for level in OrtOptions.LEVELS:
        cfg = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], ort=OrtOptions(graph_optimization_level=level))
        r = backend.build_config(cfg)
        assert r.effective_config["ort"]["graph_optimization_level"] == level
        n = len(onnx.load_from_string(r.engine).graph.node)
        assert (n == 3) if level == "disabled" else (n <= 2), level


def test_threads_and_determinism_read_back(backend, models: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    opts = OrtOptions(intra_op_threads=2, inter_op_threads=1, deterministic=False)
    r = backend.build_config(BuildConfig(name="cbr", onnx=models["conv_bn_relu"], ort=opts))
    assert r.effective_config["ort"] == opts.to_json()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("builder_optimization_level", 3),
        ("memory_pool_limits", {"workspace": "1GiB"}),
        ("flags", ("STRICT_NANS",)),
        ("timing_cache", "timing.cache"),
        ("compute_capabilities", ("SM89",)),
        ("hardware_compatibility_level", "AMPERE_PLUS"),
    ],
)
def test_tensorrt_only_fields_are_refused(backend, cbr: BuildConfig, field: str, value: object) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsupportedOption, match=f"{field}=.*TensorRT builder setting that ONNX Runtime cannot honour") as ei:
        backend.validate(cbr.replace(**{field: value}))
    assert ei.value.option == field and ei.value.backend == "onnxruntime"
    with pytest.raises(UnsupportedOption):
        backend.build_config(cbr.replace(**{field: value}))


def test_int8_without_calibration_and_tensorrt_calibrators_are_refused(backend, cbr: BuildConfig) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsupportedOption, match="precision='int8' cannot be applied by ONNX Runtime.*onnxruntime.quantization"):
        backend.validate(cbr.replace(precision="int8"))
    # entropy2 is a TensorRT calibrator; ONNX Runtime quantizes with explicit methods only
    with pytest.raises(UnsupportedOption, match="algorithm='entropy2' names a TensorRT calibrator.*minmax, entropy") as ei:
        backend.validate(cbr.replace(precision="int8", calibration=Calibration()))
    assert ei.value.option == "calibration.algorithm"
    backend.validate(cbr.replace(precision="int8", calibration=Calibration(algorithm="minmax")))
    backend.validate(cbr.replace(precision="typed"))


def test_unavailable_provider_is_an_error_not_a_cpu_fallback(backend, cbr: BuildConfig) -> None:  # type: ignore[no-untyped-def]
    cfg = cbr.replace(ort=OrtOptions(execution_providers=("CUDAExecutionProvider", "CPUExecutionProvider")))
    with pytest.raises(UnsupportedOption, match="CUDAExecutionProvider not available.*available: .*CPUExecutionProvider") as ei:
        backend.build_config(cfg)
    assert ei.value.option == "ort.execution_providers"


def test_not_onnx_bytes_fail_with_the_file_named_and_stderr_restored(
    backend, tmp_path: Path, capfd: pytest.CaptureFixture[str]  # type: ignore[no-untyped-def]
) -> None:
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"this is not a protobuf \x00\xff" * 10)
    before = _fd2()
    with pytest.raises(BuildFailed) as ei:
        backend.build_config(BuildConfig(name="garbage", onnx=bad))
    assert _fd2() == before
    err = ei.value
    assert str(bad) in err.message and err.stage == "parse" and err.config_name == "garbage"
    assert isinstance(err.context["log"], tuple)
    os.write(2, b"still captured by pytest\n")
    assert capfd.readouterr().err == "still captured by pytest\n"


def test_invalid_graph_fails_at_build_with_the_log_kept(backend, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery", domain="")
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "badop.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    before = _fd2()
    with pytest.raises(BuildFailed, match="NoSuchOp") as ei:
        backend.build_config(BuildConfig(name="badop", onnx=path))
    assert _fd2() == before
    assert ei.value.stage == "build" and str(path) in ei.value.message
    assert ei.value.context["log"], "the session log up to the failure is kept"


def test_profile_naming_a_missing_input_fails(backend, cbr: BuildConfig) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(BuildFailed, match="names input 'images', which the model does not have .inputs: input."):
        backend.build_config(cbr.replace(profiles=(Profile(images=(1, 3, 16, 16)),)))
    with pytest.raises(BuildFailed, match="allows 8..8 at axis 2 of input 'input', whose size is fixed at 16"):
        backend.build_config(cbr.replace(profiles=(Profile(input=(1, 3, 8, 8)),)))


def test_cached_engine_reloads_in_a_fresh_backend_with_identical_outputs(
    backend, cbr: BuildConfig, cbr_result: BuildResult, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    from pytest_trt.backends.onnxruntime import OrtBackend

    cbr_result.write(tmp_path / "entry")
    loaded = BuildResult.read(tmp_path / "entry")
    assert loaded.engine == cbr_result.engine and loaded.log == cbr_result.log
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    fresh = OrtBackend().runner(loaded, cbr).run({"input": x})
    built = backend.runner(cbr_result, cbr).run({"input": x})
    assert fresh.keys() == built.keys()
    for name in built:
        assert fresh[name].dtype == built[name].dtype
        np.testing.assert_array_equal(fresh[name], built[name])
    # and the record reads the same from the reloaded artifact
    assert OrtBackend().record(loaded, cbr) == backend.record(cbr_result, cbr)


def test_runner_describes_the_engine_io(backend, cbr: BuildConfig, cbr_result: BuildResult) -> None:  # type: ignore[no-untyped-def]
    runner = backend.runner(cbr_result, cbr)
    assert [(s.name, s.dtype, s.shape) for s in runner.inputs] == [("input", "float32", (-1, 3, 16, 16))]
    assert [(s.name, s.dtype, s.shape) for s in runner.outputs] == [("relu1:out", "float32", (-1, 8, 16, 16))]


def test_record_refuses_a_different_onnx(backend, cbr_result: BuildResult, models: dict[str, Path]) -> None:  # type: ignore[no-untyped-def]
    other = BuildConfig(name="cbr", onnx=models["mobilenet_v2"])
    with pytest.raises(ValueError, match="is not the ONNX this engine was built from"):
        backend.record(cbr_result, other)
