"""The golden structure check masks tactics and timings, each layer of masking on its own.

Two independent masks exist: the record stored in a golden is normalized (tactics None,
timings empty) and the structure diff runs with ``mask_tactics=True``.  Each is checked
here so that removing either one fails a test (the end-to-end check cannot see it: both
masks cover each other, and tactic changes are not structure changes).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pytest_trt.buildlog import BuildRecord, read_log
from pytest_trt.golden import structure

CORPUS = Path(__file__).resolve().parents[1] / "data" / "trt_logs"


def _trt86() -> BuildRecord:
    return read_log(CORPUS / "log_trt8.6.0_cookbook_mnist_fp16_trtexec_verbose.txt")


def _retactic(record: BuildRecord, tactic: str) -> BuildRecord:
    layers = tuple(dataclasses.replace(layer, tactic=tactic) for layer in record.layers)
    return dataclasses.replace(record, layers=layers, timings={"engine_generation_s": 123.0})


def test_stored_record_has_no_tactics_or_timings() -> None:
    record = _trt86()
    assert sum(1 for layer in record.layers if layer.tactic) == 15  # the corpus log names 15 tactics
    stored = json.loads(structure.normalized_json(record))
    assert [layer["tactic"] for layer in stored["layers"]] == [None] * 15
    assert stored["timings"] == {}
    assert "0x98e92db98836b738" not in structure.normalized_json(record)


def test_structure_diff_masks_tactic_changes_and_counts_them() -> None:
    old = _trt86()
    new = _retactic(old, "0xdeadbeef")
    diff = structure.diff(old, new)  # raw records: only the diff's own mask applies
    assert diff.tactic_changes == ()
    assert diff.masked_tactic_changes == 15
    assert diff.is_empty and not diff.has_structure_changes


def test_normalized_records_with_other_tactics_are_identical() -> None:
    old = _trt86()
    assert structure.normalized_json(old) == structure.normalized_json(_retactic(old, "0x1"))
