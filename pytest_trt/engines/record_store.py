"""The parsed build record kept beside a cache entry, so a cache hit does not parse the log again.

Parsing a build's log maps engine layers to ONNX nodes, which imports onnx and
loads the model (the larger part of a cache-hit test's cost,
``benchmarks/bench_suite.py``).  The record is a pure function of the entry (its
key names the ONNX content, config, backend versions and ``RECORD_SCHEMA``), so
it is written once, as JSON, the first time it is parsed for a complete entry,
and read back on later hits.  It is only used when it names the same entry key,
engine sha256, record schema and pytest-trt version; otherwise (an older entry,
a parser of another release) the log is parsed again and the file replaced.
A record that would not read back identical is never stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog.record import BuildRecord

RECORD_FILE = "record.json"


def _stamp(folder: Path, result: BuildResult) -> dict[str, Any]:
    from pytest_trt.buildlog.schema import RECORD_SCHEMA
    from pytest_trt.common.package import __version__

    return {"key": folder.name, "engine_sha256": result.engine_sha256, "record_schema": RECORD_SCHEMA,
            "pytest_trt": __version__}


def _stored(folder: Path, result: BuildResult) -> dict[str, Any] | None:
    """``record.json`` of this entry and engine as a dict, or None (absent, unreadable, stale or foreign stamp)."""
    try:
        data = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("stamp") != _stamp(folder, result):
        return None
    return data


def load_record(folder: Path, result: BuildResult) -> BuildRecord | None:
    """The stored record of this entry and engine, or None (absent, stale, unreadable: parse again)."""
    from pytest_trt.buildlog.record import BuildRecord

    data = _stored(folder, result)
    if data is None:
        return None
    try:
        return BuildRecord.from_dict(data["record"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def load_facts(folder: Path, result: BuildResult) -> dict[str, Any] | None:
    """The stored record's :meth:`~pytest_trt.buildlog.record.BuildRecord.facts` (layer and fusion counts, precisions)
    without making the record, or None (no record stored, a stale one, or one stored before facts were).

    A cache hit's test report needs only these: reading them skips the record classes and ~200 objects
    per engine (issue #14: the 50-test suite from the cache).
    """
    facts = (_stored(folder, result) or {}).get("facts")
    if not isinstance(facts, dict) or not all(isinstance(facts.get(k), int) for k in ("layers", "fusions")):
        return None
    precisions = facts.get("precisions")
    if not isinstance(precisions, dict) or not all(isinstance(v, int) for v in precisions.values()):
        return None
    return {"layers": facts["layers"], "fusions": facts["fusions"], "precisions": dict(precisions)}


def save_record(folder: Path, result: BuildResult, record: BuildRecord) -> bool:
    """Store ``record`` in the complete entry ``folder``; False when it cannot (read-only cache, no entry)."""
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.common.fileio import write_bytes_atomic

    if not folder.is_dir():
        return False
    payload = {"stamp": _stamp(folder, result), "record": record.to_dict(), "facts": record.facts()}
    text = json.dumps(payload, sort_keys=True)
    if BuildRecord.from_dict(json.loads(text)["record"]) != record:
        return False  # a field JSON does not carry exactly: keep parsing the log instead
    try:
        # no fsync, like the rest of the cache entry: a torn record.json is ignored when read and parsed again
        write_bytes_atomic(folder / RECORD_FILE, text.encode("utf-8"), fsync=False)
    except OSError:
        return False
    return True
