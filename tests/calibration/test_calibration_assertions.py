"""Calibration facts of logs, and the calibration assertions in their three forms, on real builds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pytest_trt import assert_calibration, assert_calibration_coverage, assert_dynamic_range, assert_int8
from pytest_trt.buildlog import calibration_assertions as rec
from pytest_trt.buildlog.calibfacts import calibration_facts
from pytest_trt.buildlog.readers import read_log
from pytest_trt.buildlog.record import BuildRecord, Message
from tests.conftest import HAS_RTX, RTX_MM, needs_ort

DATA = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
pytestmark = needs_ort


@pytest.fixture(scope="module")
def trt7_record() -> BuildRecord:
    return read_log(DATA / "log_trt7.0_sampleINT8_readme_calibration_excerpt.txt")


def test_trt7_log_facts(trt7_record: BuildRecord) -> None:
    facts = trt7_record.calibration_facts
    assert facts.calibrator == "EntropyCalibration2" and facts.cache_header == "TRT-7000-EntropyCalibration2"
    assert facts.algorithm == "entropy2" and facts.cache_written and not facts.cache_read
    assert facts.batches == 2  # the excerpt keeps batches 0 and 9 of 10


def test_warning_lines_become_typed_facts() -> None:
    lines = [
        # TensorRT 8.2 (NVIDIA/TensorRT#1837) and 10 (pytorch/TensorRT#3362) wordings
        "Calibrator won't be used in explicit precision mode. Use quantization aware training to generate network "
        "with Quantize/Dequantize nodes.",
        "Calibrator is not being used. Users must provide dynamic range for all tensors that are not Int32 or Bool.",
        # 8.6.1 python logger, trt_logs NOTES section 8
        "Missing scale and zero-point for tensor (Unnamed Layer* 300) [Constant]_output, expect fall back to "
        "non-int8 implementation for any layer consuming or producing given tensor",
        # the wording the embedding incident reported (issue 12)
        "layer 'embed_3' has dynamic range out of bound",
        "Calibration failure occurred with no scaling factors detected. This could be due to no int8 calibrator",
        "Reading Calibration Cache for calibrator: EntropyCalibration2",
        # cache rejection: no real sample in the corpus; pattern and line are pytest-trt's assumption
        "The calibration cache is incompatible with this TensorRT version and is ignored",
    ]
    f = calibration_facts(lines)
    assert len(f.calibrator_not_used) == 2
    assert f.missing_scales == ("(Unnamed Layer* 300) [Constant]_output",)
    assert f.out_of_bound_layers == ("embed_3",)
    assert len(f.failures) == 1 and f.cache_read and f.algorithm == "entropy2"
    assert len(f.cache_rejected) == 1


def test_assert_calibration_on_a_log_record(trt7_record: BuildRecord) -> None:
    rec.assert_calibration(trt7_record, "entropy2")
    rec.assert_calibration(trt7_record, "EntropyCalibration2")
    with pytest.raises(AssertionError, match=r"expected INT8 calibration with 'minmax' .*got 'entropy2'"):
        rec.assert_calibration(trt7_record, "minmax")
    with pytest.raises(AssertionError, match="no calibration evidence"):
        rec.assert_calibration(BuildRecord(source="tensorrt-log"), "entropy2")


@pytest.fixture(scope="module")
def built(incident_configs):  # type: ignore[no-untyped-def]
    """Engines of the incident's two configs (ONNX Runtime backend), calibrated through the shared store."""
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.engines.engine import Engine

    backend = create_backend("onnxruntime")
    return {c.calibration.algorithm: Engine(c, backend.build_config(c), backend) for c in incident_configs}


def test_assert_calibration_three_forms_agree(built) -> None:  # type: ignore[no-untyped-def]
    entropy, minmax = built["entropy"], built["minmax"]
    entropy.assert_calibration("entropy")
    assert_calibration("entropy", engine=entropy)
    rec.assert_calibration(entropy.record, "entropy")
    for form in (lambda: minmax.assert_calibration("entropy"), lambda: assert_calibration("entropy", engine=minmax),
                 lambda: rec.assert_calibration(minmax.record, "entropy", label=minmax.label)):
        with pytest.raises(AssertionError, match=r"digits_mnet v1.0.0 .*expected .*'entropy' .*got 'minmax'"):
            form()


def test_a_cache_header_that_disagrees_is_a_failure(built) -> None:  # type: ignore[no-untyped-def]
    record = built["entropy"].record
    stale = dataclasses.replace(record, quantization={**record.quantization,
                                                      "cache_header": "TRT-8601-MinMaxCalibration"})
    with pytest.raises(AssertionError, match=r"evidence disagrees.*\n.*-> entropy\n.*'TRT-8601-MinMaxCalibration' -> minmax"):
        rec.assert_calibration(stale, "entropy")
    # a log that says another calibrator wrote the cache disagrees as well
    logged = dataclasses.replace(record, calibration=("Writing Calibration Cache for calibrator: TRT-8601-EntropyCalibration2",))
    with pytest.raises(AssertionError, match="evidence disagrees"):
        rec.assert_calibration(logged, "entropy")


def test_assert_dynamic_range(built, calib_npz) -> None:  # type: ignore[no-untyped-def]
    with np.load(calib_npz) as d:
        data_amax = float(np.abs(d["input"]).max())
    minmax = built["minmax"]
    assert_dynamic_range("input", max_abs=data_amax * 1.0001, engine=minmax)
    with pytest.raises(AssertionError, match=rf"amax <= 10.0 for 'input'.*\n  input: range .*amax {data_amax:.6g}"):
        minmax.assert_dynamic_range("input", max_abs=10.0)
    built["entropy"].assert_dynamic_range("input", max_abs=10.0)
    with pytest.raises(AssertionError, match="no calibrated tensor matches 'nope'"):
        minmax.assert_dynamic_range("nope", max_abs=1.0)
    out_of_bound = dataclasses.replace(minmax.record, messages=(Message("WARNING", "layer 'embed_3' has dynamic range out of bound"),))
    with pytest.raises(AssertionError, match="'embed_3'"):
        rec.assert_dynamic_range(out_of_bound, "embed_3", max_abs=1.0)


def test_assert_calibration_coverage(built, calib_npz) -> None:  # type: ignore[no-untyped-def]
    with np.load(calib_npz) as d:
        counts = np.bincount(d["labels"], minlength=10)
    engine = built["entropy"]
    assert_calibration_coverage(min_per_class=int(counts.min()), engine=engine)
    need = int(counts.min()) + 1
    short = [c for c in range(10) if counts[c] < need]
    with pytest.raises(AssertionError, match=rf">= {need} calibration samples per class; {len(short)} of 10 classes"):
        engine.assert_calibration_coverage(min_per_class=need, classes=range(10))
    with pytest.raises(AssertionError, match="classes fall short.*class 11: 0"):
        engine.assert_calibration_coverage(min_per_class=1, classes=[11])


@pytest.mark.skipif(not HAS_RTX or RTX_MM == "1.4", reason="needs TensorRT-RTX 1.7 to build the Q/DQ model")
def test_assert_int8_on_tensorrt_rtx_and_onnxruntime(incident_configs, built) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.engines.engine import Engine

    config = incident_configs[0]
    backend = create_backend("tensorrt-rtx")
    rtx = Engine(config, backend.build_config(config), backend)
    assert_int8("/block1/block1.0/Conv", "re:/block\\d/block\\d\\.3/Conv", engine=rtx)
    # ONNX Runtime fuses the Q/DQ pairs into QLinearConv; the float model's Conv stays float
    built["entropy"].assert_int8("/block1/block1.0/Conv")
    ort = create_backend("onnxruntime")
    fp32 = config.replace(precision="fp32", calibration=None)
    float_engine = Engine(fp32, ort.build_config(fp32), ort)
    with pytest.raises(AssertionError, match="(?s)expected INT8 execution.*'/block1/block1.0/Conv' implemented by"):
        float_engine.assert_int8("/block1/block1.0/Conv")
