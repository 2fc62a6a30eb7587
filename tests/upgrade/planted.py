"""A planted regression: the example MobileNetV2 with one fused block numerically changed.

``block3/conv_project`` (fused with ``block3/bn_project`` by every backend) gets its weights
scaled by :data:`FACTOR`; every node before it computes exactly what the original does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import numpy_helper

from examples.models import mobilenet_v2, save

PLANTED_NODE = "block3/conv_project"
PLANTED_WEIGHT = "block3/conv_project.weight"
FACTOR = 3.0


def write_planted(path: Path) -> Path:
    model = mobilenet_v2()
    for i, init in enumerate(model.graph.initializer):
        if init.name == PLANTED_WEIGHT:
            arr = numpy_helper.to_array(init) * np.float32(FACTOR)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(arr.astype(np.float32), init.name))
            return save(model, path)
    raise AssertionError(f"{PLANTED_WEIGHT} is not an initializer of the example model")


#: a NEW run of the labelled ONNX Runtime check on the planted model: same config name and version,
#: same test function name, same golden dataset (run from the repository root, file outside it)
PLANTED_SUITE = '''
import dataclasses
import pytest
from examples.upgrade.test_upgrade_ort import LABELLED, MNV2_LABELLED_ORT

PLANTED = dataclasses.replace(MNV2_LABELLED_ORT, onnx={model!r})


@pytest.mark.trt(PLANTED)
def test_labelled_outputs_match_golden(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=LABELLED, l2_delta=0.05, top1_drop=0.005)
'''
