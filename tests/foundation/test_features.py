"""Feature probing: the API shapes of TensorRT 8.6, 10 and 11 decide what a config may ask.

Full TensorRT is not installable here, so these tests describe each version's
*enum members* (taken from NVIDIA's Python API reference) as plain namespaces
and check the probe's decisions; no build result is simulated.  The real
probe of TensorRT-RTX runs against the installed module.
"""

from __future__ import annotations

import enum
from types import SimpleNamespace

import pytest

from pytest_trt.backends.trt_features import probe
from tests.conftest import needs_rtx


def _api(version: str, builder_flags: list[str], network_flags: list[str], calibrators: bool):
    class Cfg:
        builder_optimization_level = 3

        def create_timing_cache(self):  # pragma: no cover - only probed
            pass

    ns = SimpleNamespace(
        __name__="tensorrt",
        __version__=version,
        BuilderFlag=enum.Enum("BuilderFlag", builder_flags),
        NetworkDefinitionCreationFlag=enum.Enum("NetworkDefinitionCreationFlag", network_flags),
        MemoryPoolType=enum.Enum("MemoryPoolType", ["WORKSPACE", "TACTIC_SHARED_MEMORY"]),
        HardwareCompatibilityLevel=enum.Enum("HardwareCompatibilityLevel", ["NONE", "AMPERE_PLUS"]),
        IBuilderConfig=Cfg,
    )
    if calibrators:
        ns.IInt8EntropyCalibrator2 = object
    return ns


TRT86 = _api("8.6.1", ["FP16", "INT8", "TF32", "STRICT_NANS"], ["EXPLICIT_BATCH"], True)
TRT10 = _api("10.13.0", ["FP16", "BF16", "INT8", "FP8", "TF32"], ["EXPLICIT_BATCH", "STRONGLY_TYPED"], True)
TRT11 = _api("11.4.0", ["TF32", "STRICT_NANS"], ["STRONGLY_TYPED"], False)


def test_trt86_needs_explicit_batch_and_has_precision_flags():
    f = probe(TRT86)
    assert f.use_explicit_batch and not f.strongly_typed_only
    assert f.precision_flags["best"] == ("FP16", "INT8")  # no BF16 flag in 8.6
    assert f.calibrators_usable and f.timing_cache_effective and f.backend_name == "tensorrt"


def test_trt10_ignores_explicit_batch_and_keeps_every_precision():
    f = probe(TRT10)
    assert not f.use_explicit_batch  # deprecated and ignored from 10.0
    assert f.precision_flags["best"] == ("FP16", "BF16", "INT8")
    assert "STRONGLY_TYPED" in f.network_flags


def test_trt11_is_strongly_typed_only():
    f = probe(TRT11)
    assert f.strongly_typed_only and not f.calibrators_usable


@pytest.mark.parametrize(("api", "precision", "ok"), [(TRT86, "fp16", True), (TRT11, "fp16", False), (TRT86, "typed", False), (TRT10, "typed", True)])
def test_validation_follows_the_probe(api, precision, ok, models):
    from pytest_trt import BuildConfig, UnsupportedOption
    from pytest_trt.backends.tensorrt import TensorRTBackend

    backend = TensorRTBackend("tensorrt")
    backend.__dict__["trt"] = api  # validation reads only the probed API
    backend.__dict__["features"] = probe(api)
    cfg = BuildConfig(name="m", onnx=models["conv_bn_relu"], precision=precision)
    if ok:
        backend.validate(cfg)
    else:
        with pytest.raises(UnsupportedOption, match=f"precision={precision!r}"):
            backend.validate(cfg)


@needs_rtx
def test_tensorrt_rtx_probe():
    import tensorrt_rtx

    f = probe(tensorrt_rtx)
    assert f.is_rtx and f.strongly_typed_only and not f.calibrators_usable
    assert not f.timing_cache_effective and not f.use_explicit_batch
    assert {"SM80", "SM86", "SM89", "SM120"} <= set(f.compute_capabilities)
