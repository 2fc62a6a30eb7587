"""Where a snapshot came from, and what a difference from the engine's provenance does.

A snapshot made by another backend version, on another device or from
another config is exactly what an upgrade produces, and the question on an
upgrade is whether the new engine is still within the approved thresholds.
So by default (policy ``compare``) the check compares anyway, decides by
the thresholds and the structure check, and reports the differences; an
approved refresh records the new provenance.  Policy ``fail`` (or
``fail_on`` per field) makes differences fatal: the snapshot is *tainted*.

A snapshot of another golden dataset is always fatal: its outputs belong to
other inputs, so no comparison means anything.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_trt.common.units import utc_now

#: fields compared between a snapshot and the engine; the others are informational
TAINT_FIELDS = ("backend", "backend_version", "device", "config_hash", "onnx_sha256", "dataset_sha256")
#: fields a policy may make fatal (``dataset_sha256`` always is)
POLICY_FIELDS = TAINT_FIELDS[:-1]
ALWAYS_FATAL = ("dataset_sha256",)
COMPARE, FAIL = "compare", "fail"
POLICY_MODES = (COMPARE, FAIL)


@dataclass(frozen=True)
class ProvenancePolicy:
    """What a provenance difference does: ``compare`` (report it) or ``fail``; ``fail_on`` fields always fail."""

    mode: str = COMPARE
    fail_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in POLICY_MODES:
            raise ValueError(f"provenance policy {self.mode!r}: choose one of {', '.join(POLICY_MODES)}")
        unknown = [f for f in self.fail_on if f not in POLICY_FIELDS]
        if unknown:
            raise ValueError(f"provenance field {unknown[0]!r} is not one of {', '.join(POLICY_FIELDS)}")

    def fatal(self, field_name: str) -> bool:
        return self.mode == FAIL or field_name in self.fail_on or field_name in ALWAYS_FATAL


@dataclass(frozen=True)
class Provenance:
    """Identity of a snapshot.  ``device`` is canonical JSON so it compares as text."""

    backend: str
    backend_version: str
    device: str
    config_hash: str
    onnx_sha256: str
    dataset_sha256: str
    plugin_version: str
    created: str  # ISO 8601, UTC
    git_commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Provenance:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    def tainted_fields(self, current: Provenance) -> tuple[str, ...]:
        """The :data:`TAINT_FIELDS` whose values differ; unknown ("") current values are skipped."""
        return tuple(
            f for f in TAINT_FIELDS if getattr(current, f) != "" and getattr(self, f) != getattr(current, f)
        )


def plugin_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("pytest-trt")
    except PackageNotFoundError:  # running from a source checkout
        return "0+unknown"


def git_commit(cwd: Path) -> str | None:
    """HEAD of the repository holding ``cwd``, with ``+dirty`` when the tree has changes."""
    import subprocess  # not at plugin load: the golden hooks import this module for its policy names

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def canonical_device(device: Any) -> str:
    return json.dumps(device, sort_keys=True, separators=(",", ":"), default=str)


def from_engine(engine: Any, *, dataset_sha256: str, cwd: Path | None, created: str | None = None) -> Provenance:
    """Provenance of ``engine`` (a :class:`~pytest_trt.golden.workflow.EngineLike`); git only with ``cwd``."""
    result = engine.result
    return Provenance(
        backend=str(result.backend or engine.backend_name),
        backend_version=str(result.backend_version),
        device=canonical_device(getattr(result, "device", {})),
        config_hash=str(result.config_hash),
        onnx_sha256=str(result.onnx_sha256),
        dataset_sha256=dataset_sha256,
        plugin_version=plugin_version(),
        created=created or utc_now(microseconds=False),
        git_commit=git_commit(cwd) if cwd is not None else None,
    )


def from_outputs(config: Any, *, dataset_sha256: str, cwd: Path | None, created: str | None = None) -> Provenance:
    """Provenance when only outputs are given: backend and device are unknown ("")."""
    return Provenance(
        backend="",
        backend_version="",
        device="",
        config_hash=str(config.config_hash) if config is not None else "",
        onnx_sha256=str(config.onnx_sha256) if config is not None else "",
        dataset_sha256=dataset_sha256,
        plugin_version=plugin_version(),
        created=created or utc_now(microseconds=False),
        git_commit=git_commit(cwd) if cwd is not None else None,
    )
