"""The TensorRT-RTX corpus facts in MANIFEST.json were written by generate_rtx_logs.py through the parser
under test; here they are checked against an independent reading of the raw log (a plain regex over the
DETAILED ``Name: ..., LayerType: ...`` lines) and against counts read by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_trt.buildlog import read_log

CORPUS = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
_LAYER_LINE = re.compile(r"^Name: (?P<name>[^,]+), LayerType: (?P<type>[^,]+),")
_ONNX = re.compile(r"\[ONNX Layer: ([^\]\x1f]+)\]")

#: counted by hand in the two logs (grep -c '^Name: '; kernels naming >= 2 distinct ONNX nodes)
BY_HAND = {"log_rtx1.7.1_mobilenet_v2_detailed.txt": (19, 15), "log_rtx1.4.0_mobilenet_v2_detailed.txt": (20, 15)}


def _independent(path: Path) -> tuple[list[str], list[list[str]]]:
    names, fused = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _LAYER_LINE.match(line)
        if m is None:
            continue
        names.append(m["name"])
        origins = _ONNX.findall(line.split("Metadata: ", 1)[1] if "Metadata: " in line else "")
        if len(set(origins)) >= 2:
            fused.append(origins)
    return names, fused


@pytest.mark.parametrize("name", sorted(BY_HAND))
def test_rtx_corpus_facts_hold_by_an_independent_reading(name: str) -> None:
    path = CORPUS / name
    names, fused = _independent(path)
    assert (len(names), len(fused)) == BY_HAND[name]
    manifest = next(e for e in json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8")) if e["file"] == name)
    expected = manifest["expected"]
    assert expected["detailed_layer_count"] == len(names)
    assert all(f in fused for f in expected["fused_origins"])
    record = read_log(path)
    assert [layer.name for layer in record.layers] == names
    assert [list(layer.origins) for layer in record.fusions] == fused
