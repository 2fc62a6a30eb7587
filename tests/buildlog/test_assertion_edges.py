"""Edges of node matching and fusion assertions that only hand-made records can pin down (found by
scripts/mutate.py): a regex must match a whole node name, and a helper layer's origins are no fusion."""

from __future__ import annotations

import pytest

from pytest_trt.buildlog.assertions import assert_fused, resolve_nodes
from pytest_trt.buildlog.record import BuildRecord, Layer


def test_a_regex_pattern_matches_whole_names_only():
    record = BuildRecord(source="test", layers=(Layer("conv1", "Convolution", origins=("conv1",)),
                                                Layer("conv10", "Convolution", origins=("conv10",))))
    assert resolve_nodes(record, "re:conv1") == ("conv1",)
    assert resolve_nodes(record, r"re:conv\d+") == ("conv1", "conv10")


def test_a_helper_layer_holding_both_nodes_is_no_fusion():
    """TensorRT's own shape kernels may name several ONNX nodes; only a compute layer proves a fusion."""
    record = BuildRecord(source="test", layers=(
        Layer("conv1", "Convolution", origins=("conv1",)),
        Layer("relu1", "Activation", origins=("relu1",)),
        Layer("shape_call_0", "shape_call", origins=("conv1", "relu1"), kind="helper"),
    ))
    with pytest.raises(AssertionError, match="expected 'conv1', 'relu1' fused into one layer, but no layer holds"):
        assert_fused(record, "conv1", "relu1")
