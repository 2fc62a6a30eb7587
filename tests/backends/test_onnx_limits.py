"""The ONNX limits check: the default domain in both spellings, and the release table matched on the version.

Expected numbers are fixed here: the rows of docs/backends.md (TensorRT-RTX 1.7 parses IR <= 12 and opset <= 24,
1.4 IR <= 11 and opset <= 23, TensorRT 11.x IR <= 13 and opset <= 25), read from each parser library by hand.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trt import BuildConfig
from pytest_trt.backends.onnx_limits import OnnxHeader, limits_for, read_header, unsupported_reason
from pytest_trt.errors import BuildFailed
from tests.conftest import HAS_RTX, RTX_MM


def _relu(path: Path, imports: list[tuple[str, int]], ir: int = 8) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in imports])
    model.ir_version = ir
    onnx.save(model, str(path))
    return path


SPELLINGS = [
    ([("", 99)], 99),
    ([("ai.onnx", 99)], 99),
    ([("", 99), ("ai.onnx", 17)], 99),  # both spellings: the newest import counts, wherever it stands
    ([("ai.onnx", 17), ("", 99)], 99),
    ([("ai.onnx", 17), ("com.example", 99)], 17),  # another domain's version is not the default domain's
    ([("com.example", 1)], None),
]


@pytest.mark.parametrize(("imports", "opset"), SPELLINGS)
def test_header_reads_the_default_domain_in_either_spelling(tmp_path: Path, imports, opset) -> None:  # type: ignore[no-untyped-def]
    assert read_header(_relu(tmp_path / "m.onnx", imports)) == OnnxHeader(8, opset)


@pytest.mark.parametrize("imports", [i for i, o in SPELLINGS if o == 99])
def test_opset_99_is_refused_however_the_default_domain_is_spelled(tmp_path: Path, imports) -> None:  # type: ignore[no-untyped-def]
    path = _relu(tmp_path / "m.onnx", imports)
    reason = unsupported_reason(path, module="tensorrt_rtx", version="1.7.1.116", product="TensorRT-RTX")
    assert reason is not None and "opset 99" in reason and "opset <= 24" in reason


@pytest.mark.skipif(not HAS_RTX, reason="needs TensorRT-RTX (the check runs before its parser)")
@pytest.mark.parametrize("imports", [[("", 99), ("ai.onnx", 17)], [("ai.onnx", 99)]])
def test_tensorrt_rtx_build_refuses_the_model(tmp_path: Path, imports) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt.backends.registry import create_backend

    path = _relu(tmp_path / "m.onnx", imports)
    with pytest.raises(BuildFailed, match=r"declares ONNX IR version 8 and opset 99; TensorRT-RTX") as ei:
        create_backend("tensorrt-rtx").build_config(BuildConfig(name="opset99", onnx=path))
    assert ei.value.stage == "parse"
    limit = {"1.7": 24, "1.4": 23}.get(RTX_MM)
    if limit is not None:
        assert f"opset <= {limit}" in str(ei.value)


@pytest.mark.parametrize(("module", "version", "row"), [
    ("tensorrt_rtx", "1.7.1.116", (12, 24)),
    ("tensorrt_rtx", "1.7", (12, 24)),
    ("tensorrt_rtx", "1.4.0.76", (11, 23)),
    ("tensorrt", "11.0.0.1", (13, 25)),
    ("tensorrt", "11.9.0", (13, 25)),
    ("onnxruntime", "1.32.0", (14, 28)),
    # no row: the installed onnx bounds them, never a row whose version merely starts the same
    ("tensorrt_rtx", "1.70.0", None),
    ("tensorrt_rtx", "1.5.0.1", None),
    ("tensorrt_rtx", "17.1", None),
    ("tensorrt", "10.14.1", None),
    ("tensorrt", "1.7.1.116", None),
    ("tensorrt", "110.0", None),
    ("onnxruntime", "1.3.2", None),
])
def test_the_release_table_matches_the_version(module: str, version: str, row: tuple[int, int] | None) -> None:
    found = limits_for(module, version)
    if row is None:
        assert found.source.startswith(f"no table row for {module} {version}")
        assert (found.max_ir, found.max_opset) == (onnx.IR_VERSION, onnx.defs.onnx_opset_version())
    else:
        assert (found.max_ir, found.max_opset) == row and not found.source.startswith("no table row")
