"""Check mode: compare with the snapshot, read-only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.buildlog.record_diff import RecordDiff
from pytest_trt.compare.accumulate import baseline_of
from pytest_trt.compare.assess import judge, with_noise
from pytest_trt.compare.output_summary import summarize_outputs
from pytest_trt.compare.render import update_command
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.compare.verdict import ProvenanceChange
from pytest_trt.errors import GoldenError, GoldenMissing
from pytest_trt.golden import array_digests, noise, provenance, running, structure
from pytest_trt.golden.approvals import read_jsonl
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.layout import SnapshotView
from pytest_trt.golden.results import CheckResult, GoldenScope, raise_failure, warn_structure
from pytest_trt.golden.store import GoldenFile, guard, max_label
from pytest_trt.options import INI_PROVENANCE as PROVENANCE_INI
from pytest_trt.options import INI_PROVENANCE_FAIL_ON as PROVENANCE_FAIL_ON_INI
from pytest_trt.options import PROVENANCE as PROVENANCE_OPTION


def current_provenance(engine: Any, config: Any, dataset_sha256: str) -> provenance.Provenance:
    if engine is not None:
        return provenance.from_engine(engine, dataset_sha256=dataset_sha256, cwd=None)
    return provenance.from_outputs(config, dataset_sha256=dataset_sha256, cwd=None)


def provenance_changes(old: provenance.Provenance, new: provenance.Provenance,
                       policy: provenance.ProvenancePolicy) -> tuple[ProvenanceChange, ...]:
    """Each differing field, with the golden's and the engine's value, and whether ``policy`` makes it fatal."""
    def show(p: provenance.Provenance, f: str) -> str:
        if f == "backend_version":
            return f"{p.backend} {p.backend_version}".strip()
        value = str(getattr(p, f))
        return value[:12] if f.endswith(("_hash", "_sha256")) else value

    return tuple(ProvenanceChange(f, show(old, f), show(new, f), policy.fatal(f)) for f in old.tainted_fields(new))


def provenance_lines(changes: tuple[ProvenanceChange, ...]) -> list[str]:
    """The failure message's provenance lines: fatal differences, then those compared anyway."""
    fatal = [c for c in changes if c.fatal]
    lines = [f"the snapshot is tainted: {c.field} differs (golden {c.golden!r}, now {c.engine!r})" for c in fatal]
    if fatal:
        lines.append("the provenance policy requires an approved refresh for these fields "
                     f"({PROVENANCE_OPTION}, ini {PROVENANCE_INI} / {PROVENANCE_FAIL_ON_INI}; the dataset always); "
                     "the comparison below is for the reviewer")
    lines += [f"provenance differs, compared anyway: {c.field}: golden {c.golden}, engine {c.engine}"
              for c in changes if not c.fatal]
    return lines


def provenance_note(golden: str, changes: tuple[ProvenanceChange, ...], command: str) -> str:
    """The note of a passing check whose golden has another provenance."""
    diffs = "; ".join(f"{c.field}: golden {c.golden}, engine {c.engine}" for c in changes)
    return (f"{golden}: provenance differs ({diffs}); within thresholds; approve a refresh to record the new "
            f"provenance:\n  {command}")


def _refuse_edited(g: GoldenFile, snap: Any, path: Path) -> None:
    """Before any data is read: an unapproved generation, an edited small part or dataset is an edited golden."""
    edited = unapproved(g, snap) + g.small_parts_edited(snap)
    if g.dataset_edited():
        edited.append(f"the stored golden dataset does not match its sha256 ({g.dataset_sha256[:16]}...)")
    if edited:
        raise array_digests.edited_error(path, edited)


def verify(
    scope: GoldenScope,
    config: Any,
    engine: Any,
    outputs: Mapping[str, np.ndarray] | None,
    *,
    structure: str,
    dataset: GoldenDataset | None,
    limits: ThresholdSet,
    batch_size: int | None,
    classifier: Callable[[str], bool | None],
    tolerance: str | None = None,
) -> CheckResult:
    """Compare ``engine`` (or ``outputs``) with the golden of ``config``; raise on any failure.  ``tolerance=
    "measured"``: the thresholds the noise measured at approval suggests (explicit ones still win)."""
    __tracebackhide__ = True
    name = config.name
    path: Path = scope.path_for(name)
    if not path.exists():
        raise GoldenMissing(scope.missing_message(name, path, f"{path} does not exist", needs_dataset=dataset is None),
                            path=str(path))
    with GoldenFile(path) as g, guard(path):
        snap = _snapshot(g, scope, name, path, needs_dataset=dataset is None)
        dataset_sha256 = g.dataset_sha256  # the golden dataset checked against, named in the bundle's verdict
        _refuse_unapproved(g, snap, path, scope)
        measured = noise.stored(snap.noise)
        if tolerance == "measured":
            limits = _measured_limits(limits, measured, snap, path)
        problems: list[str] = []
        if dataset is not None and dataset.digest() != g.dataset_sha256:
            problems.append("the dataset passed to check() differs from the golden file's dataset")
        now = current_provenance(engine, config, g.dataset_sha256)
        changes = provenance_changes(snap.provenance, now, scope.settings.provenance)
        label = f"golden {path.name} [{name}]"
        labels, tags = g.label_rows(), g.tag_rows()  # read per batch by the accumulators
        make = running.accumulator_factory(snap.baselines, classifier, max_label(labels), strict=True,
                                           labels=labels, tags=tags)
        # bytes the approval log vouches for hold the approved arrays; else each slab is hashed as it is read
        hashed = not array_digests.logged(read_jsonl(path.parent), path, name, snap.generation, g.sha256)
        inputs = {n: array_digests.DigestedArray(ds, f"input {n!r}", verify=hashed) for n, ds in g.inputs().items()}
        golden_outputs = {n: array_digests.DigestedArray(ds, f"output {n!r}", verify=hashed)
                          for n, ds in snap.outputs.items()}
        accumulators = {n: make(n, ds) for n, ds in golden_outputs.items()}
        running.feed(engine, outputs, inputs, g.samples, batch_size, accumulators,
                     golden_outputs=golden_outputs, label=label, new=make)
        edited = [m for a in (*inputs.values(), *golden_outputs.values()) if (m := a.mismatch()) is not None]
        if edited:  # before any metric is judged: an edited golden is not an engine regression
            raise array_digests.edited_error(path, edited)
        metrics = {n: a.result(g.samples, baseline_of(snap.baselines, n)) for n, a in accumulators.items()}
        record_json = snap.record_json()
        generation = snap.generation
    structure_text = None
    if engine is not None and record_json is not None and structure != "ignore":
        diff = _structure_diff(record_json, engine.record)
        structure_text = diff.render() if diff.has_structure_changes else None
    failing_structure = structure_text if structure == "fail" else None
    verdict = judge(metrics, limits, problems=problems, provenance=changes, structure_text=failing_structure)
    if measured is not None:
        verdict = with_noise(verdict, measured.figures())
    golden_label = f"{path} [{name}] generation {generation}, {sum(1 for _ in metrics)} outputs"
    # what the upgrade report draws from (pytest_trt.compare.output_summary), kept with the verdict in the bundle
    outputs_summary = {**summarize_outputs(accumulators, metrics, limits), "golden_file": str(path)}
    if not verdict.passed or any(c.fatal for c in changes):
        try:
            raise_failure(scope, golden=golden_label, verdict=verdict, metrics=metrics,
                             provenance_lines=provenance_lines(changes))
        except GoldenError as exc:
            exc.context["outputs_summary"] = outputs_summary
            exc.context["golden_generation"] = (str(path), generation)  # the verdict names what it was checked against
            exc.context["golden_dataset_sha256"] = dataset_sha256
            raise
    if structure_text and structure == "warn":
        warn_structure(structure_text, golden_label)
    note = None
    if changes:
        command = update_command(scope.command_nodeid, reason="REASON", args=scope.settings.command_args)
        note = provenance_note(f"{path.name} [{name}] generation {generation}", changes, command)
    return CheckResult(name, path, generation, metrics, structure_text, verdict, note, outputs_summary,
                       dataset_sha256=dataset_sha256)




def _refuse_unapproved(g: GoldenFile, snap: SnapshotView, path: Path, scope: GoldenScope) -> None:
    """Before any data is read: a snapshot edited after its approval, or (``trt_require_signed_approval``,
    ``trt_approvals_required``) one without valid approval signatures, is not evidence."""
    _refuse_edited(g, snap, path)
    if scope.settings.signoff_required:
        from pytest_trt.common.filehash import sha256_file
        from pytest_trt.golden import signoff

        signoff.require(path, snap.config, snap.generation, g.sha256 or sha256_file(path), scope.settings)


def _snapshot(g: GoldenFile, scope: GoldenScope, name: str, path: Path, *, needs_dataset: bool) -> SnapshotView:
    """The snapshot of ``name`` in the open golden ``g``; GoldenMissing (with the create command) when there is none."""
    if not g.has_dataset:
        raise GoldenMissing(scope.missing_message(name, path, f"{path} holds no golden dataset",
                                                  needs_dataset=needs_dataset), path=str(path))
    if name not in g:
        held = ", ".join(sorted(g)) or "none"
        raise GoldenMissing(scope.missing_message(name, path, f"{path} has no snapshot for it (snapshots: {held})"),
                            path=str(path))
    return g[name]


def _measured_limits(limits: ThresholdSet, measured: Any, snap: SnapshotView, path: Path) -> ThresholdSet:
    """``limits`` with the thresholds the noise measured at approval suggests (explicit thresholds still win)."""
    if measured is None:
        raise GoldenError(
            f"{path} [{snap.config}]: check(tolerance=\"measured\") needs the noise measured at approval, and "
            f"generation {snap.generation} has none ({noise.describe(snap.noise)}); approve the golden "
            "again (--trt-update-golden --trt-approve REASON) with an engine that runs here, or measure "
            "it with `pytest-trt golden tolerance` and give the thresholds to check()", path=str(path))
    return limits.with_measured(measured.suggested())


def unapproved(g: GoldenFile, snap: SnapshotView) -> list[str]:
    """The snapshot's generation, when the file holds no approval record of it (every approved update writes one)."""
    for record in g.approvals():
        if record.get("config") == snap.config and record.get("generation") == snap.generation:
            return []
    return [f"snapshot {snap.config!r} generation {snap.generation} has no approval record in the file"]


def _structure_diff(record_json: str, record: Any) -> RecordDiff:
    old = structure.load_normalized(record_json)
    new = structure.load_normalized(structure.normalized_json(record))
    return structure.diff(old, new)
