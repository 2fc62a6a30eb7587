"""Explicit quantization for real: Q/DQ models from each method, run by ONNX Runtime, built by TensorRT-RTX 1.7."""

from __future__ import annotations

import hashlib
import struct

import numpy as np
import onnx
import pytest

from pytest_trt.calibration.explicit import calibrate_explicit, typed_config
from pytest_trt.config import EXPLICIT_METHODS
from pytest_trt.errors import BuildFailed
from tests.conftest import HAS_RTX, RTX_MM, needs_ort

pytestmark = needs_ort
rtx17 = pytest.mark.skipif(not HAS_RTX or RTX_MM == "1.4",
                           reason=f"needs TensorRT-RTX 1.7 (installed: {RTX_MM if HAS_RTX else 'none'}); "
                                  "1.4 refuses Q/DQ INT8 (test_rtx14_refuses_qdq_int8)")


def _digits_test_set():  # type: ignore[no-untyped-def]
    from examples.calibration.incident import digits

    x, y, _, test = digits()
    return x[test], y[test]


@pytest.mark.parametrize("algorithm", EXPLICIT_METHODS)
def test_each_method_gives_a_qdq_model_onnxruntime_runs(method_config, algorithm) -> None:  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    outcome = calibrate_explicit(method_config(algorithm))
    model = onnx.load(str(outcome.qdq_model))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("QuantizeLinear") >= 10 and ops.count("DequantizeLinear") >= ops.count("QuantizeLinear")
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear":  # symmetric INT8: int8 zero points equal to 0
            zp = onnx.numpy_helper.to_array(inits[node.input[2]])
            assert zp.dtype == np.int8 and not zp.any(), node.name
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:  # no int32 bias: TensorRT rejects it
            assert inits[node.input[0]].data_type == onnx.TensorProto.INT8, node.name
    x, y = _digits_test_set()
    logits = ort.InferenceSession(str(outcome.qdq_model), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert logits.shape == (len(y), 10)
    assert float(np.mean(logits.argmax(1) == y)) > 0.8  # a working classifier, whatever the method


@rtx17
@pytest.mark.parametrize("algorithm", ["entropy", "minmax"])
def test_tensorrt_rtx_builds_the_qdq_model_with_int8_layers(method_config, algorithm) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend

    backend = create_backend("tensorrt-rtx")
    config = method_config(algorithm)
    result = backend.build_config(config)
    assert result.config_hash == config.config_hash and result.onnx_sha256 == config.onnx_sha256
    assert result.effective_config["quantization"] == "explicit-qdq"
    record = backend.record(result, config)
    int8 = [la for la in record.layers if any(t.dtype == "Int8" for t in (*la.inputs, *la.outputs))]
    assert len(int8) >= 5, [(la.name, la.precision) for la in record.layers]
    assert "[ONNX Layer: /block1/block1.0/Conv]" in result.log_text()  # the log names the Q/DQ graph's convs
    assert record.quantization["algorithm"] == algorithm


def test_methods_give_different_ranges_on_outlier_data(method_config, calib_npz) -> None:  # type: ignore[no-untyped-def]
    with np.load(calib_npz) as d:
        data_amax = float(np.abs(d["input"]).max())
    amax = {a: calibrate_explicit(method_config(a)).ranges.amax("input") for a in EXPLICIT_METHODS}
    assert amax["minmax"] == pytest.approx(data_amax, rel=1e-6)  # min-max covers the largest outlier
    assert amax["entropy"] < data_amax / 3  # the KL search clips the heavy tail
    assert amax["percentile"] < amax["minmax"]
    tables = {a: calibrate_explicit(method_config(a)).info["ranges"] for a in EXPLICIT_METHODS}
    assert tables["entropy"] != tables["minmax"] and tables["percentile"] != tables["minmax"]


def test_cache_holds_amax_over_127_per_tensor(method_config) -> None:  # type: ignore[no-untyped-def]
    outcome = calibrate_explicit(method_config("minmax"))
    lines = outcome.cache_text.splitlines()
    assert lines[0] == "TRT-0000-MinMaxCalibration"
    written = {k: struct.unpack(">f", bytes.fromhex(v))[0] for k, _, v in (ln.rpartition(": ") for ln in lines[1:])}
    ranges = outcome.info["ranges"]
    assert set(written) == set(ranges)
    for name, (lo, hi) in ranges.items():
        assert written[name] == pytest.approx(max(abs(lo), abs(hi)) / 127.0, rel=1e-6), name


def test_second_calibration_comes_from_the_store(method_config) -> None:  # type: ignore[no-untyped-def]
    first = calibrate_explicit(method_config("minmax"))
    again = calibrate_explicit(method_config("minmax"))
    assert again.from_store and again.folder == first.folder
    assert again.info["qdq_model_sha256"] == hashlib.sha256(again.qdq_model.read_bytes()).hexdigest()


def test_pinned_cache_hash_mismatch_fails_the_build_with_both_hashes(method_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend

    wrong = "0" * 64
    config = method_config("minmax", cache=tmp_path / "digits.cache", cache_sha256=wrong)
    with pytest.raises(BuildFailed) as ei:
        create_backend("onnxruntime").build_config(config)
    actual = hashlib.sha256(calibrate_explicit(method_config("minmax")).cache_text.encode()).hexdigest()
    assert wrong in str(ei.value) and actual in str(ei.value)
    # pinned right, it builds and leaves the cache file with those bytes
    create_backend("onnxruntime").build_config(method_config("minmax", cache=tmp_path / "ok.cache", cache_sha256=actual))
    assert hashlib.sha256((tmp_path / "ok.cache").read_bytes()).hexdigest() == actual


def test_existing_cache_is_read_and_one_of_another_algorithm_fails(method_config, tmp_path, data_dir) -> None:  # type: ignore[no-untyped-def]
    cache = tmp_path / "c.cache"
    written = calibrate_explicit(method_config("minmax", cache=cache))
    assert cache.read_text() == written.cache_text
    from_cache = calibrate_explicit(method_config("minmax", cache=cache))
    assert from_cache.info["ranges_source"] == "cache"
    assert from_cache.ranges.amax("input") == pytest.approx(written.ranges.amax("input"), rel=1e-6)
    other = tmp_path / "entropy2.cache"
    other.write_bytes((data_dir / "calib_trt8.6.1_entropy2_segformer.cache").read_bytes())
    with pytest.raises(BuildFailed, match="written by 'EntropyCalibration2' .*pins algorithm='minmax'"):
        calibrate_explicit(method_config("minmax", cache=other))


def test_onnxruntime_backend_runs_the_calibrated_engine(method_config) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend

    backend = create_backend("onnxruntime")
    config = method_config("minmax")
    result = backend.build_config(config)
    x, y = _digits_test_set()
    out = backend.runner(result, config).run({"input": x[:64]})["logits"]
    assert float(np.mean(out.argmax(1) == y[:64])) > 0.8
    assert result.extra["qdq_model_sha256"] == calibrate_explicit(config).info["qdq_model_sha256"]


def _refuse(option: str, why: str):  # type: ignore[no-untyped-def]
    from pytest_trt.errors import UnsupportedOption

    return UnsupportedOption(f"{option}: {why}", backend="tensorrt-rtx", option=option)


@pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed")
def test_feature_table_sends_rtx_to_qdq_and_refuses_14(method_config) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    import tensorrt_rtx

    from pytest_trt.backends.trt_features import check_calibration, probe
    from pytest_trt.errors import UnsupportedOption

    features = probe(tensorrt_rtx)
    config = method_config("entropy")
    for version, refused in (("1.4.0.76", True), ("1.7.1.116", False), ("1.8.0", False)):
        f = dataclasses.replace(features, version=version)
        if refused:
            with pytest.raises(UnsupportedOption, match="cannot build INT8 Q/DQ models .*Myelin"):
                check_calibration(config.calibration, config.precision, f, f"TensorRT-RTX {version}", _refuse)
        else:
            built_as = check_calibration(config.calibration, config.precision, f, f"TensorRT-RTX {version}", _refuse)
            assert built_as == "typed"
    entropy2 = method_config("entropy2")
    with pytest.raises(UnsupportedOption, match="no INT8 calibrators .*'entropy2' cannot run"):
        check_calibration(entropy2.calibration, entropy2.precision, features, "TensorRT-RTX", _refuse)


@pytest.mark.skipif(not HAS_RTX or RTX_MM != "1.4", reason=f"needs TensorRT-RTX 1.4 (tox -e rtx14); installed: "
                    f"{RTX_MM if HAS_RTX else 'none'}")
def test_rtx14_refuses_qdq_int8_with_a_clear_error(method_config) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.errors import UnsupportedOption

    backend = create_backend("tensorrt-rtx")
    config = method_config("minmax")
    with pytest.raises(UnsupportedOption, match="TensorRT-RTX 1.4.* cannot build INT8 Q/DQ models.*tensorrt-rtx>=1.7"):
        backend.validate(config)
    # the table's fact, measured again: the Q/DQ model itself does not build with 1.4
    qdq = calibrate_explicit(config).qdq_model
    with pytest.raises(BuildFailed, match="Myelin|failed to build"):
        backend.build_config(typed_config(config, qdq))


def test_per_channel_weights_get_one_scale_per_output_channel(method_config) -> None:  # type: ignore[no-untyped-def]
    def weight_scales(outcome) -> dict[str, int]:  # type: ignore[no-untyped-def]
        model = onnx.load(str(outcome.qdq_model))
        inits = {i.name: i for i in model.graph.initializer}
        return {n.name: int(np.prod(inits[n.input[1]].dims)) for n in model.graph.node
                if n.op_type == "DequantizeLinear" and n.input[0] in inits and inits[n.input[0]].data_type == onnx.TensorProto.INT8}

    per_tensor = weight_scales(calibrate_explicit(method_config("minmax")))
    per_channel = weight_scales(calibrate_explicit(method_config("minmax", per_channel=True)))
    assert per_tensor and set(per_tensor.values()) == {1}
    assert max(per_channel.values()) == 64  # block2/block3 convolutions have 64 output channels
    if HAS_RTX and RTX_MM != "1.4":
        from pytest_trt.backends.registry import create_backend

        config = method_config("minmax", per_channel=True)
        backend = create_backend("tensorrt-rtx")
        record = backend.record(backend.build_config(config), config)
        assert any(t.dtype == "Int8" for la in record.layers for t in la.inputs)
