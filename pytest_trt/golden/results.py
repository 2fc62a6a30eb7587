"""What the golden workflow is given, hands back and raises: settings, the test's scope, results, the failure.

The bottom of the golden workflow: :mod:`workflow` (``GoldenCheck``), :mod:`verifying`,
:mod:`updating` and :mod:`timing` import it, and it imports none of them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pytest_trt.compare.render import render_deltas, render_regression, update_command
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.compare.verdict import OutputMetrics, Verdict
from pytest_trt.errors import GoldenRegression, GoldenStructureWarning, GoldenTainted
from pytest_trt.golden.approvals import Approval
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.signing import Signer

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
    signer: Signer | None = None  # signs the approval lines of this session's refreshes (--trt-approve-key)
    approvers: Path | None = None  # the allowed-signers file (ini trt_approvers)
    require_signed: bool = False  # ini trt_require_signed_approval
    approvals_required: int = 1  # ini trt_approvals_required: distinct signers a golden generation needs
    bundle_signer: str | None = None  # "SHA256:..." of the session's bundle key (--trt-sign-key)
    measure_noise: bool = True  # ini trt_golden_measure_noise: the approval measures the engine against its reference

    @property
    def signoff_required(self) -> bool:
        """Whether a check needs valid approval signatures (:mod:`pytest_trt.golden.signoff`)."""
        return self.require_signed or self.approvals_required > 1


@dataclass(frozen=True)
class GoldenScope:
    """What the check, update and timing modes need of one test: the settings, its ids, where its notes go."""

    settings: GoldenSettings
    nodeid: str | None = None
    #: the test id as typed where pytest was invoked (suggested commands); ``nodeid`` stays rootdir-relative
    command_nodeid: str | None = None
    on_note: Callable[[str], None] | None = None

    def path_for(self, config_name: str) -> Path:
        """``<golden_dir>/<config name>.h5``."""
        folder = self.settings.golden_dir
        if folder.exists() and not folder.is_dir():
            from pytest_trt.golden.writers import folder_error  # loads h5py: not when the fixture is made

            raise folder_error(folder)
        return folder / f"{config_name}.h5"

    def note(self, text: str) -> None:
        """A provenance note for the terminal summary (a passing check whose evidence differs)."""
        if self.on_note is not None:
            self.on_note(text)

    def missing_message(self, name: str, path: Path, what: str, *, needs_dataset: bool = False) -> str:
        """The missing-golden failure; with ``needs_dataset`` it names the golden dataset first."""
        command = update_command(self.command_nodeid, args=self.settings.command_args)
        if needs_dataset:
            return (f"no golden for {name!r}: {what}, and check() was given no golden dataset to create it from. "
                    "Pass one, e.g. trt_golden.check(trt_engine, "
                    "dataset=GoldenDataset.from_directory(\"golden_data\")) "
                    "(a folder of <input>.npy files and an optional labels.npy) or "
                    "dataset=GoldenDataset.from_arrays({\"<input>\": array}, labels=...), with "
                    f"`from pytest_trt import GoldenDataset`; then, after checking the engine, create the golden with:"
                    f"\n  {command}")
        return (f"no golden for {name!r}: {what}. Goldens are never created silently; after checking the "
                f"engine, create it with:\n  {command}")


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
    dataset_sha256: str | None = None  # the golden dataset's digest


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
    noise: Mapping[str, Any] | None = None  # the snapshot's measured noise (pytest_trt.golden.noise), or why none
    dataset_sha256: str | None = None  # the golden dataset's digest

    def summary_lines(self) -> list[str]:
        """Terminal-summary lines: what the refresh changed, per output; the noise measured."""
        label = f"{self.path.name} [{self.config}] generation {self.generation}"
        lines = render_deltas(label, self.deltas, previous=self.generation - 1, dataset_changed=self.dataset_changed)
        if self.structure:
            lines += [f"{label}: structure: {s}" for s in self.structure.splitlines()]
        if self.noise is not None:
            from pytest_trt.golden.noise import describe

            lines.append(f"{label}: {describe(self.noise)}")
        return lines


def raise_failure(scope: GoldenScope, *, golden: str, verdict: Verdict, metrics: Mapping[str, OutputMetrics],
                  provenance_lines: list[str]) -> None:
    """Raise GoldenTainted (a fatal provenance difference) or GoldenRegression with the one rendered message."""
    __tracebackhide__ = True
    message = render_regression(golden=golden, breaches=verdict.breaches, metrics=list(metrics.values()),
                                structure=verdict.structure, problems=[*provenance_lines, *verdict.problems],
                                nodeid=scope.command_nodeid, command_args=scope.settings.command_args,
                                checks=verdict.checks, refused=verdict.refused)
    fatal = tuple(p.field for p in verdict.provenance if p.fatal)
    if fatal:
        raise GoldenTainted(message, fields=fatal, verdict=verdict.to_dict())
    raise GoldenRegression(message, breaches=[b.line() for b in verdict.breaches], verdict=verdict.to_dict())


def warn_structure(text: str, golden: str) -> None:
    warnings.warn(GoldenStructureWarning(f"{golden}: the engine's structure differs from the golden's:\n{text}"),
                  stacklevel=3)
