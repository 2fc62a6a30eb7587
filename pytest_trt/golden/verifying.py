"""Check mode: compare with the snapshot, read-only."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_trt.buildlog.diff import RecordDiff
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.errors import GoldenError, GoldenMissing
from pytest_trt.golden import provenance, structure
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.store import GoldenFile, guard
from pytest_trt.upgrade.outputs import summarize_outputs

if TYPE_CHECKING:
    from pytest_trt.golden.workflow import CheckResult, GoldenCheck


def current_provenance(engine: Any, config: Any, dataset_sha256: str) -> provenance.Provenance:
    if engine is not None:
        return provenance.from_engine(engine, dataset_sha256=dataset_sha256, cwd=None)
    return provenance.from_outputs(config, dataset_sha256=dataset_sha256, cwd=None)


def tainted_lines(old: provenance.Provenance, new: provenance.Provenance, fields: tuple[str, ...]) -> list[str]:
    lines = [f"the snapshot is tainted: {f} differs (golden {getattr(old, f)!r}, now {getattr(new, f)!r})"
             for f in fields]
    if fields:
        lines.append("a tainted snapshot does not describe this engine: an approved refresh is needed "
                     "(the comparison below is for the reviewer)")
    return lines


def verify(
    check: GoldenCheck,
    config: Any,
    engine: Any,
    outputs: Mapping[str, np.ndarray] | None,
    *,
    structure: str,
    dataset: GoldenDataset | None,
    limits: ThresholdSet,
    batch_size: int | None,
) -> CheckResult:
    """Compare ``engine`` (or ``outputs``) with the golden of ``config``; raise on any failure."""
    __tracebackhide__ = True
    from pytest_trt.golden import workflow as wf

    name = config.name
    path: Path = check.path_for(name)
    if not path.exists():
        raise GoldenMissing(check.missing_message(name, path, f"{path} does not exist"), path=str(path))
    with GoldenFile(path) as g, guard(path):
        if not g.has_dataset:
            raise GoldenMissing(check.missing_message(name, path, f"{path} holds no golden dataset"), path=str(path))
        if name not in g:
            held = ", ".join(sorted(g)) or "none"
            raise GoldenMissing(check.missing_message(name, path, f"{path} has no snapshot for it (snapshots: {held})"),
                                path=str(path))
        snap = g[name]
        problems: list[str] = []
        if dataset is not None and dataset.digest() != g.dataset_sha256:
            problems.append("the dataset passed to check() differs from the golden file's dataset")
        now = current_provenance(engine, config, g.dataset_sha256)
        tainted = snap.provenance.tainted_fields(now)
        problems += tainted_lines(snap.provenance, now, tainted)
        label = f"golden {path.name} [{name}]"
        streams = wf.pre_streams(snap.outputs, snap.baselines, strict=True)
        wf.feed(check, engine, outputs, g.inputs(), g.samples, batch_size, streams,
                golden_outputs=snap.outputs, label=label)
        labels, tags = g.labels(), g.tags()
        metrics = {n: s.result(g.samples, labels, tags, wf.baseline_of(snap.baselines, n)) for n, s in streams.items()}
        record_json = snap.record_json()
        generation = snap.generation
    breaches = wf.evaluate_all(metrics, limits)
    structure_text = None
    if engine is not None and record_json is not None and structure != "ignore":
        diff = _structure_diff(record_json, engine.record)
        structure_text = diff.render() if diff.has_structure_changes else None
    failing_structure = structure_text if structure == "fail" else None
    golden_label = f"{path} [{name}] generation {generation}, {sum(1 for _ in metrics)} outputs"
    # what the upgrade report draws from (pytest_trt.upgrade.outputs), kept with the verdict in the bundle
    outputs_summary = {**summarize_outputs(streams, metrics, limits, labels), "golden_file": str(path)}
    if problems or breaches or failing_structure:
        try:
            wf.raise_failure(check, golden=golden_label, tainted=tainted, problems=problems, breaches=breaches,
                             metrics=metrics, structure_text=failing_structure)
        except GoldenError as exc:
            exc.context["outputs_summary"] = outputs_summary
            raise
    if structure_text and structure == "warn":
        wf.warn_structure(structure_text, golden_label)
    return wf.CheckResult(name, path, generation, metrics, structure_text, outputs_summary)


def _structure_diff(record_json: str, record: Any) -> RecordDiff:
    old = structure.load_normalized(record_json)
    new = structure.load_normalized(structure.normalized_json(record))
    return structure.diff(old, new)
