"""Update mode: write an approved snapshot atomically and record the approval.

Runs under the file's lock on a temporary copy (see :mod:`pytest_trt.golden.atomic`):
the previous snapshot moves to ``/history``, the engine's outputs stream into
the new one while being compared with the previous generation, and the
approval (with those deltas) is appended to the file and, once the new file is
complete and before it replaces the old one, to APPROVALS.jsonl with the new
file's sha256 (log first: a golden generation never lacks its line).  The log's
lock is held around the whole refresh, so the golden's record and the log line
name the same chain head (:mod:`pytest_trt.golden.chain`); with an approval key
the line is signed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import h5py
import numpy as np

from pytest_trt.common.units import utc_now
from pytest_trt.compare.accumulate import baseline_of
from pytest_trt.compare.assess import unevaluable
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.errors import GoldenError, GoldenMissing
from pytest_trt.golden import array_digests, atomic, layout, noise, provenance, running, store, structure, writers
from pytest_trt.golden.approvals import Approval, approver, check_log, held_log
from pytest_trt.golden.dataset import GoldenDataset, dataset_digest
from pytest_trt.golden.results import GoldenScope, UpdateResult


class _Sink:
    """Writes output batches into the new snapshot group, creating datasets on the first batch.

    The h5py dataset handles stay open across batches: looking a dataset up
    again per batch made HDF5 flush and re-read partly written chunks (with
    lzf, each chunk was decompressed and recompressed about four times).
    """

    def __init__(self, group: h5py.Group, samples: int) -> None:
        self.group, self.samples = group, samples
        self._datasets: dict[str, h5py.Dataset] = {}
        self._digests: dict[str, array_digests.StreamDigest] = {}

    def __call__(self, start: int, outputs: Mapping[str, np.ndarray]) -> None:
        for name, value in outputs.items():
            arr = np.asarray(value)
            writers.check_finite(name, start, arr)
            ds = self._datasets.get(name)
            if ds is None:
                ds = writers.create_output(self.group, name, self.samples, tuple(arr.shape[1:]), arr.dtype)
                self._datasets[name] = ds
                self._digests[name] = array_digests.StreamDigest(ds.dtype, tuple(ds.shape))
            ds[start : start + arr.shape[0]] = arr
            self._digests[name].update(start, arr.astype(ds.dtype, copy=False))

    def seal(self) -> None:
        """Record each output's digest (batches arrive in order; a gap would be a bug, so it is hashed again)."""
        for name, ds in self._datasets.items():
            d = self._digests[name]
            ds.attrs[array_digests.DIGEST_ATTR] = d.hexdigest() if d.complete else array_digests.array_digest(ds)


def _ensure_dataset(f: h5py.File, dataset: GoldenDataset | None, scope: GoldenScope, name: str) -> bool:
    """Write ``dataset`` when the file lacks one or holds another; return whether it changed."""
    if "dataset" not in f:
        if dataset is None:
            raise GoldenMissing(
                f"no golden dataset for {name!r} in {scope.path_for(name)}: pass one to check(), e.g. "
                "dataset=GoldenDataset.from_directory(\"golden_data\") or GoldenDataset.from_arrays(...) "
                "(`from pytest_trt import GoldenDataset`), or write one into the file with "
                "pytest_trt.golden.updating.create_golden(path, dataset)",
                path=str(scope.path_for(name)),
            )
        writers.write_dataset(f, dataset)
        return True
    if dataset is not None and dataset.digest() != str(f["dataset"].attrs["sha256"]):
        writers.write_dataset(f, dataset)  # approved replacement: every other snapshot becomes tainted
        return True
    return False


def update(scope: GoldenScope, config: Any, engine: Any, outputs: Mapping[str, np.ndarray] | None, *,
           dataset: GoldenDataset | None, batch_size: int | None,
           classifier: Callable[[str], bool | None] = lambda name: None,
           limits: ThresholdSet | None = None) -> UpdateResult:
    """Write the approved snapshot of ``config``; return what changed against the previous one.

    ``limits``: the check's thresholds; one that the next check of this very snapshot could not evaluate
    (``top1_drop`` without labels, ``top1_agreement`` without class scores) refuses the update before anything
    is written.  The engine's noise against its unoptimized reference is measured in the same pass
    (:mod:`pytest_trt.golden.noise`) and written into the snapshot.
    """
    __tracebackhide__ = True
    settings = scope.settings
    if not settings.approve:
        raise GoldenError("updating a golden needs a reason: add --trt-approve \"REASON\"")
    name = config.name
    path = scope.path_for(name)
    label = f"golden {path.name} [{name}]"
    check_log(settings.golden_dir)  # before anything moves
    logged: list[Approval] = []

    change = change_record(settings)
    # lock order: the approval log, then the golden file; the golden's record and the log line name one chain head
    with held_log(settings.golden_dir, folder_error=lambda exc: writers.folder_error(settings.golden_dir, exc)) as log:
        def log_first(digests: dict[str, Any]) -> None:  # the new file is complete and not yet in place
            record = json.loads(json.dumps(logged[0].to_dict(), default=_jsonable))
            log.append({**record, **digests}, settings.signer)  # file_sha256, file_blocks; chained, signed

        with atomic.update(path, on_complete=log_first) as f, store.guard(path):
            dataset_changed = _ensure_dataset(f, dataset, scope, name)
            ds_group = f["dataset"]
            samples, digest = int(ds_group.attrs["samples"]), str(ds_group.attrs["sha256"])
            labels = ds_group["labels"] if "labels" in ds_group else None  # datasets, read per batch
            tags = ds_group["tags"] if "tags" in ds_group else None
            old = layout.snapshot_view(name, f["snapshots"][name]) if f"snapshots/{name}" in f else None
            old_prov, old_record = (old.provenance, old.record_json()) if old else (None, None)
            old_baselines = dict(old.baselines) if old else {}
            group, generation = writers.begin_snapshot(f, name)
            compare_old = old is not None and not dataset_changed
            old_outputs = (layout.output_datasets(f[f"history/{name}/gen-{generation - 1:04d}"]) if compare_old
                           else {})
            max_label = store.max_label(labels)
            make = running.accumulator_factory(old_baselines, classifier, max_label, strict=False,
                                               labels=labels, tags=tags)
            accumulators = {n: make(n, ds) for n, ds in old_outputs.items()}
            sink = _Sink(group, samples)
            fed, noise_record = (noise.tap(engine, noise.classifier_rule(old_baselines, classifier, max_label))
                                 if settings.measure_noise
                                 else (engine, lambda: noise.not_measured("ini trt_golden_measure_noise = false")))
            running.feed(fed, outputs, dict(ds_group["inputs"].items()), samples, batch_size, accumulators,
                         golden_outputs=None, label=label, sink=sink, new=make)
            sink.seal()
            deltas = {n: a.result(samples, baseline_of(old_baselines, n))
                      for n, a in accumulators.items() if a.golden is not None}
            baselines = {n: a.baseline() for n, a in accumulators.items()}
            if limits is not None:  # inside the atomic update: a refusal writes nothing and logs no approval
                _refuse_unevaluable(limits, accumulators, samples, baselines, label)
            new_prov = (provenance.from_engine(engine, dataset_sha256=digest, cwd=settings.rootdir)
                        if engine is not None
                        else provenance.from_outputs(config, dataset_sha256=digest, cwd=settings.rootdir))
            record_json = structure.normalized_json(engine.record) if engine is not None else None
            diff = None
            if old_record is not None and record_json is not None:
                diff = structure.diff(structure.load_normalized(old_record), structure.load_normalized(record_json))
            approval = Approval(
                time=utc_now(microseconds=False), approver=approver(settings.rootdir), reason=settings.approve,
                file=path.name, config=name, generation=generation,
                old_provenance=old_prov.to_dict() if old_prov else None, new_provenance=new_prov.to_dict(),
                deltas={n: m.to_dict() for n, m in deltas.items()},
                structure=None if diff is None else diff.to_dict(), test=scope.nodeid,
                report=settings.approve_report, prev_sha256=log.head,
                principal=settings.signer.principal if settings.signer is not None else None, change=change,
            )
            writers.finish_snapshot(group, generation=generation, provenance=new_prov, baselines=baselines,
                                  record_json=record_json, noise=(measured := noise_record()))
            writers.append_approval(f, approval.to_dict())
            logged.append(approval)
    structure_text = None if diff is None or diff.is_empty else diff.render()
    return UpdateResult(name, path, generation, deltas, structure_text, approval,
                           dataset_changed=old is not None and dataset_changed, noise=measured, dataset_sha256=digest)



def _refuse_unevaluable(limits: ThresholdSet, accumulators: Mapping[str, Any], samples: int,
                        baselines: Mapping[str, Any], label: str) -> None:
    """Refuse thresholds the next check of these very outputs could not evaluate: the golden could never pass."""
    facts = {n: a.as_golden(samples, baseline_of(baselines, n)) for n, a in accumulators.items()}
    refused = unevaluable(limits, facts)
    if refused:
        raise GoldenError(
            f"{label}: refusing to approve: {'; '.join(refused)}. The next check of this snapshot would "
            "refuse the same threshold, so the golden could never pass: change the threshold in check() "
            "(or give the golden dataset what it needs) and approve again", refused=list(refused),
        )


def change_record(settings: Any) -> dict[str, Any]:
    """Who makes this change, for the two-person rule: the session's git e-mail and bundle key fingerprint."""
    from pytest_trt.golden.signing import git_value

    return {"git_email": git_value(["config", "user.email"], settings.rootdir), "bundle_signer": settings.bundle_signer}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)


def create_golden(path: str, dataset: GoldenDataset) -> None:
    """Create a golden file holding only ``dataset`` (snapshots come from an approved update).

    Refuses to replace a different dataset in an existing file: that is an
    approved act, done through ``check(dataset=...)`` in update mode.
    """
    from pathlib import Path

    target = Path(path)
    with atomic.update(target) as f, store.guard(target):
        if "dataset" in f:
            held = str(f["dataset"].attrs["sha256"])
            if held != dataset_digest(dataset.inputs.items(), dataset.labels, dataset.tags):
                raise GoldenError(
                    f"{target} already holds a different golden dataset; replace it through an approved update "
                    "(check(dataset=...) with --trt-update-golden --trt-approve \"REASON\")", path=str(target),
                )
            return
        writers.write_dataset(f, dataset)
