"""``--trt-approve-report report.html``: tie an approved golden refresh to the upgrade report it was decided on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_trt.common.filehash import sha256_file
from pytest_trt.errors import ReportReferenceError


def report_reference(path: str | Path) -> dict[str, Any]:
    """``{"path": ..., "sha256": ...}`` of the report, for APPROVALS.jsonl and the golden's history."""
    p = Path(path)
    try:
        digest = sha256_file(p)
    except OSError as exc:
        raise ReportReferenceError(
            f"--trt-approve-report {p}: cannot read the report ({exc.strerror or exc}); write it first with "
            "`pytest-trt upgrade-report OLD NEW -o report.html`") from None
    return {"path": str(p), "sha256": digest}
