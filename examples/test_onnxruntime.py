"""The same model on ONNX Runtime: engines that run on any CPU, golden snapshots, differential tests.

    pytest --trt-backend onnxruntime --trt-engine-build examples/test_onnxruntime.py

The golden test fails until a golden exists: goldens are never created silently.
Approve the first one (and every later refresh) explicitly:

    pytest --trt-backend onnxruntime --trt-engine-build --trt-update-golden \\
        --trt-approve "first approval of mobilenet_v2 1.0.0" examples/test_onnxruntime.py
"""

from __future__ import annotations

import numpy as np
import pytest

from examples.conftest import MODELS
from pytest_trt import BuildConfig, GoldenDataset, OrtOptions, Profile, assert_fused

MNV2_ORT = BuildConfig(
    name="mobilenet_v2_ort",
    version="1.0.0",
    onnx=MODELS["mobilenet_v2"],
    profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32)))],
    ort=OrtOptions(graph_optimization_level="extended", intra_op_threads=1),
)

# A fixed, seeded golden dataset: 48 samples, a few tagged as edge cases (all-dark and saturated images).
_rng = np.random.default_rng(1234)
_images = _rng.random((48, 3, 32, 32), dtype=np.float32)
_images[:4] = 0.0
_images[4:8] = 1.0
GOLDEN_DATA = GoldenDataset.from_arrays(
    {"input": _images}, tags=np.array(["edge"] * 8 + ["typical"] * 40)
)


@pytest.fixture(autouse=True)
def _cpu_backend_only(trt_backend):
    if trt_backend.name != "onnxruntime":
        pytest.skip(
            f"this example runs engines on the CPU: use --trt-backend onnxruntime (session uses {trt_backend.name})"
        )


@pytest.mark.trt(MNV2_ORT)
def test_onnx_runtime_fuses_like_tensorrt(trt_engine):
    assert_fused("conv1", "bn1", "relu1")
    assert_fused("block1/conv_dw", "block1/bn_dw", "block1/relu6")


@pytest.mark.trt(MNV2_ORT)
def test_engine_matches_plain_onnx_semantics(trt_engine, trt_reference):
    batch = {"input": _images[:40]}  # 40 > the profile's max of 32: run() splits the batch
    got = trt_engine.run(batch)["logits"]
    want = trt_reference.run(batch)["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.trt(MNV2_ORT)
def test_outputs_match_the_approved_golden(trt_engine, trt_golden):
    # the seed incident's L2 threshold; this dataset has no labels, so top-1 is judged by agreement with
    # the golden's own predictions (top1_drop would be refused: it needs labels)
    trt_golden.check(trt_engine, dataset=GOLDEN_DATA, classifier=["logits"], l2_delta=0.05, top1_agreement=0.995)
