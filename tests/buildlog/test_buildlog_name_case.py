"""ONNX node names are case-sensitive (ONNX names are): ``BLOCK1/CONV_DW`` is not ``block1/conv_dw``."""

from __future__ import annotations

import re

import pytest

from pytest_trt.buildlog import BuildRecord, UnknownNodeError, assert_fused, assert_no_fusion, assert_precision
from pytest_trt.buildlog.assertions import resolve_nodes


@pytest.mark.parametrize(
    ("pattern", "how"),
    [("BLOCK1/CONV_DW", "exact"), ("Block1/conv_dw", "exact"), ("BLOCK1/*", "glob"), ("re:BLOCK1/CONV_DW", "regex")],
)
def test_node_names_match_case_sensitively(rtx17: BuildRecord, pattern: str, how: str) -> None:
    assert resolve_nodes(rtx17, pattern.lower() if how != "regex" else "re:block1/conv_dw")  # the lower case exists
    with pytest.raises(UnknownNodeError, match=re.escape(f"no ONNX node matches {pattern!r} ({how} match")):
        resolve_nodes(rtx17, pattern)
    with pytest.raises(UnknownNodeError):
        assert_fused(rtx17, pattern, "block1/relu6")
    with pytest.raises(UnknownNodeError):
        assert_no_fusion(rtx17, pattern, "conv1")
    with pytest.raises(UnknownNodeError):
        assert_precision(rtx17, pattern, "fp32")
