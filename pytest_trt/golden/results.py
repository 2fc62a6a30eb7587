"""What the golden workflow hands back and raises: settings, results, the regression failure.

Shared by :mod:`workflow` (``GoldenCheck``), :mod:`verifying`, :mod:`updating` and
:mod:`timing`, which import it instead of each other (no import cycle).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from pytest_trt.compare.render import render_deltas, render_regression
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.compare.verdict import OutputMetrics, Verdict
from pytest_trt.errors import GoldenRegression, GoldenStructureWarning, GoldenTainted
from pytest_trt.golden.approvals import Approval
from pytest_trt.golden.provenance import ProvenancePolicy

if TYPE_CHECKING:
    from pytest_trt.golden.workflow import GoldenCheck

#: ``check(classifier=...)``: True/False for every output, output names, or ``{name: bool}``
Classifier = bool | Iterable[str] | Mapping[str, bool] | None


@runtime_checkable
class EngineLike(Protocol):
    """What a golden check needs of an engine (``pytest_trt.engines.engine.Engine`` fits)."""

    @property
    def config(self) -> Any: ...  # BuildConfig: .name, .config_hash, .onnx_sha256, .profiles

    @property
    def result(self) -> Any: ...  # BuildResult: .backend, .backend_version, .device, .config_hash, .onnx_sha256

    @property
    def record(self) -> Any: ...  # BuildRecord

    @property
    def label(self) -> str: ...

    @property
    def backend_name(self) -> str: ...

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class GoldenSettings:
    """Session-wide settings, from the command line and ini."""

    golden_dir: Path
    update: bool = False
    approve: str | None = None
    thresholds: ThresholdSet = field(default_factory=ThresholdSet)
    rootdir: Path | None = None  # where git is asked for the commit and the approver
    command_args: tuple[str, ...] = ()  # session options the update command must repeat (--trt-backend ...)
    provenance: ProvenancePolicy = field(default_factory=ProvenancePolicy)
    approve_report: dict[str, Any] | None = None  # {"path", "sha256"} of the upgrade report (--trt-approve-report)


@dataclass(frozen=True)
class CheckResult:
    """A passing check (a failing one raises)."""

    config: str
    path: Path
    generation: int
    metrics: Mapping[str, OutputMetrics]
    structure: str | None  # rendered diff when it changed and the test allowed it
    verdict: Verdict = field(default_factory=Verdict)
    note: str | None = None  # provenance differences within thresholds, for the terminal summary
    outputs_summary: dict[str, Any] | None = None  # per-output figures for the bundle (pytest_trt.upgrade.outputs)


@dataclass(frozen=True)
class UpdateResult:
    """An approved refresh; ``deltas`` compare the new outputs with the previous generation."""

    config: str
    path: Path
    generation: int
    deltas: Mapping[str, OutputMetrics]
    structure: str | None
    approval: Approval
    dataset_changed: bool = False  # the refresh replaced the golden dataset: earlier outputs ran other inputs

    def summary_lines(self) -> list[str]:
        """Terminal-summary lines: what the refresh changed, per output."""
        label = f"{self.path.name} [{self.config}] generation {self.generation}"
        lines = render_deltas(label, self.deltas, previous=self.generation - 1, dataset_changed=self.dataset_changed)
        if self.structure:
            lines += [f"{label}: structure: {s}" for s in self.structure.splitlines()]
        return lines


def raise_failure(check: GoldenCheck, *, golden: str, verdict: Verdict, metrics: Mapping[str, OutputMetrics],
                  provenance_lines: list[str]) -> None:
    """Raise GoldenTainted (a fatal provenance difference) or GoldenRegression with the one rendered message."""
    __tracebackhide__ = True
    message = render_regression(golden=golden, breaches=verdict.breaches, metrics=list(metrics.values()),
                                structure=verdict.structure, problems=[*provenance_lines, *verdict.problems],
                                nodeid=check.command_nodeid, command_args=check.settings.command_args,
                                checks=verdict.checks, refused=verdict.refused)
    fatal = tuple(p.field for p in verdict.provenance if p.fatal)
    if fatal:
        raise GoldenTainted(message, fields=fatal, verdict=verdict.to_dict())
    raise GoldenRegression(message, breaches=[b.line() for b in verdict.breaches], verdict=verdict.to_dict())


def warn_structure(text: str, golden: str) -> None:
    warnings.warn(GoldenStructureWarning(f"{golden}: the engine's structure differs from the golden's:\n{text}"),
                  stacklevel=3)
