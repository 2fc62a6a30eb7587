"""ONNX Runtime part of the suite the upgrade review runs on two backend releases (see README, "Upgrade review").

TensorRT-RTX axis (builds only; RTX cannot run engines on a CPU-only machine)::

    pytest --trt-backend tensorrt-rtx --trt-engine-build --trt-bundle-dir upgrade-runs/rtx14 examples/

ONNX Runtime axis (goldens approved on the older release, checked on both)::

    pytest --trt-backend onnxruntime --trt-engine-build --trt-update-golden --trt-approve "..." examples/upgrade
    pytest --trt-backend onnxruntime --trt-engine-build --trt-bundle-dir upgrade-runs/ort-old examples/upgrade
"""

from __future__ import annotations

import numpy as np
import pytest

from examples.upgrade.conftest import FP32, QDQ
from pytest_trt import BuildConfig, OrtOptions, Profile
from pytest_trt.golden.dataset import GoldenDataset

MNV2_QDQ_ORT = BuildConfig(name="mobilenet_v2_qdq_ort", version="1.0.0", onnx=QDQ,
                           ort=OrtOptions(graph_optimization_level="all", intra_op_threads=1))
MNV2_LABELLED_ORT = BuildConfig(
    name="mobilenet_v2_labelled_ort", version="1.0.0", onnx=FP32,
    profiles=[Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (32, 3, 32, 32)))],
    ort=OrtOptions(graph_optimization_level="all", intra_op_threads=1),
)

_rng = np.random.default_rng(2024)
_images = _rng.random((64, 3, 32, 32), dtype=np.float32)
#: labels of a random-weight model carry no meaning: seeded, so accuracy and confusion are reproducible
LABELLED = GoldenDataset.from_arrays({"input": _images}, labels=_rng.integers(0, 10, 64),
                                     tags=["dark"] * 16 + ["typical"] * 48)
SINGLE = GoldenDataset.from_arrays({"input": _images[:24].copy()}, labels=_rng.integers(0, 10, 24))


@pytest.fixture(autouse=True)
def _onnxruntime_only(trt_backend):
    if trt_backend.name != "onnxruntime":
        pytest.skip(f"runs engines on the CPU: use --trt-backend onnxruntime (session uses {trt_backend.name})")


@pytest.mark.trt(MNV2_QDQ_ORT)
def test_qdq_outputs_match_golden(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=SINGLE, l2_delta=0.05, top1_drop=0.05, batch_size=1)


@pytest.mark.trt(MNV2_LABELLED_ORT)
def test_labelled_outputs_match_golden(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=LABELLED, l2_delta=0.05, top1_drop=0.005)
