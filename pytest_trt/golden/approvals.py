"""Approval records: who refreshed which golden, why, and what it changed.

Each refresh appends one record inside the golden file (travels with it) and
one line to ``<golden_dir>/APPROVALS.jsonl`` (one reviewable log per repo).
The file record is written first: it lands atomically with the snapshot, and
the JSONL line follows; a kill in between loses only the duplicate line.
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_trt.common.fileio import locked

APPROVALS_FILE = "APPROVALS.jsonl"


@dataclass(frozen=True)
class Approval:
    """One approved refresh of a snapshot."""

    time: str  # ISO 8601, UTC
    approver: str
    reason: str
    file: str
    config: str
    generation: int
    old_provenance: dict[str, Any] | None
    new_provenance: dict[str, Any]
    deltas: dict[str, Any]  # output -> figures of new vs old outputs
    structure: dict[str, Any] | None  # record diff old -> new, None when not compared
    test: str | None = None
    report: dict[str, Any] | None = None  # {"path", "sha256"} of the upgrade report the approval was made on

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def approver(cwd: Path | None = None) -> str:
    """``git config user.name`` (plus email), else the OS user."""
    try:
        name = subprocess.run(["git", "config", "user.name"], cwd=cwd, capture_output=True, text=True, timeout=10)
        email = subprocess.run(["git", "config", "user.email"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if name.returncode == 0 and name.stdout.strip():
            mail = email.stdout.strip()
            return name.stdout.strip() + (f" <{mail}>" if mail else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no passwd entry in some containers
        return os.environ.get("USER") or "unknown"


def append_jsonl(golden_dir: Path, record: Mapping[str, Any]) -> Path:
    """Append ``record`` as one line to ``APPROVALS.jsonl``, serialized across processes."""
    path = golden_dir / APPROVALS_FILE
    line = json.dumps(dict(record), sort_keys=True, separators=(",", ":")) + "\n"
    with locked(path.with_name(path.name + ".lock"), what=f"approval log {path}"):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
    return path


def read_jsonl(golden_dir: Path) -> list[dict[str, Any]]:
    path = golden_dir / APPROVALS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
