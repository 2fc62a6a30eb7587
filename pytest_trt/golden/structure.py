"""The structure half of a golden: the normalized BuildRecord and its comparison.

The seed incident's fusion (depthwise conv + ReLU6) showed in the build record
before any output moved, so a snapshot stores the record and a check diffs it
with ``pytest_trt.buildlog.record_diff.diff_records``.  Tactic choices and timings
vary from build to build of the same engine and are masked before storing.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_trt.buildlog.record import BuildRecord
from pytest_trt.buildlog.record_diff import RecordDiff, diff_records

#: per-layer and record-level fields that differ between identical rebuilds
_VOLATILE_RECORD = {"timings": {}, "total_lines": 0, "unparsed_lines": 0}
_VOLATILE_LAYER = {"tactic": None}
STRUCTURE_MODES = ("fail", "warn", "ignore")


def normalize(record: BuildRecord) -> dict[str, Any]:
    """``record.to_dict()`` with tactics and timings masked."""
    d = record.to_dict()
    d.update(_VOLATILE_RECORD)
    d["layers"] = [{**layer, **_VOLATILE_LAYER} for layer in d.get("layers", [])]
    return d


def normalized_json(record: BuildRecord) -> str:
    return json.dumps(normalize(record), sort_keys=True, separators=(",", ":"))


def load_normalized(text: str) -> BuildRecord:
    return BuildRecord.from_dict(json.loads(text))


def diff(old: BuildRecord, new: BuildRecord) -> RecordDiff:
    """Diff two records (tactics masked) with the build-record differ."""
    return diff_records(old, new, mask_tactics=True)
