"""``pytest-trt log diff``: the structure part of the upgrade report for two verbose build logs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.buildlog.events import fusion_sets, uses_events
from pytest_trt.buildlog.record import BuildRecord
from pytest_trt.buildlog.record_diff import RecordDiff, diff_records


@dataclass(frozen=True)
class LogDiff:
    """Two logs, how each was read, and their :class:`RecordDiff`."""

    old: str
    new: str
    old_record: BuildRecord
    new_record: BuildRecord
    diff: RecordDiff

    def _side(self, record: BuildRecord) -> dict[str, Any]:
        return {
            "backend_version": record.backend_version,
            "layers": len(record.layers),
            "fusions": len(fusion_sets(record)),
            "fusion_events": len(record.fusion_events),
            "fusions_from": "fusion events (no layer listing)" if uses_events(record) else "layer listing",
            "warnings": len(record.warnings),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "old_summary": self._side(self.old_record),
                "new_summary": self._side(self.new_record), "diff": self.diff.to_dict(),
                "identical": self.diff.is_empty}

    def lines(self, *, limit: int = 20) -> list[str]:
        out = [f"--- {self.old}", f"+++ {self.new}"]
        for sign, record in (("old", self.old_record), ("new", self.new_record)):
            s = self._side(record)
            out.append(f"{sign}: TensorRT {s['backend_version'] or 'version not stated'}, {s['layers']} layers, "
                       f"{s['fusions']} fusions (from the {s['fusions_from']}), {s['warnings']} warnings")
        out += self.diff.render(limit=limit).splitlines()
        return out


def diff_logs(old: Path, new: Path, *, mask_tactics: bool = True, onnx: Path | None = None,
              records: tuple[BuildRecord, BuildRecord] | None = None) -> LogDiff:
    """Read both logs (any dialect the parser knows) and diff their records (``records``: both, read already)."""
    from pytest_trt.buildlog.summary import read_log_record

    a, b = records if records is not None else (read_log_record(old, onnx=onnx), read_log_record(new, onnx=onnx))
    return LogDiff(str(old), str(new), a, b, diff_records(a, b, mask_tactics=mask_tactics))
