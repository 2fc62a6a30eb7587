"""Retention: delete old bundles, never the evidence something still points at.

A bundle is kept, whatever its age, when

* an approval was made from it (a golden refresh, verdict ``updated``);
* it is the newest bundle checked against a golden generation: the last
  evidence of that step in the golden's history;
* a model version registered in MLflow was made from it;
* it is among the ``--keep-last`` newest bundles of its config;
* it is younger than ``--older-than``.

:func:`plan_prune` decides (a pure function of the rows, so it is
property-tested); :func:`apply_prune` deletes files and marks their rows
``pruned`` (the row stays: the catalog remembers what existed), with each deleted
bundle's sidecar (:mod:`pytest_trt.audit.sidecar`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pytest_trt.audit.attest import attestation_path, bom_path
from pytest_trt.audit.sidecar import sidecar_path
from pytest_trt.catalog.store import Catalog
from pytest_trt.common.filehash import sha256_file


@dataclass(frozen=True)
class Candidate:
    sha256: str
    path: str
    config_name: str | None
    created: str  # ISO UTC; sorts as time


@dataclass(frozen=True)
class PrunePlan:
    keep: Mapping[str, tuple[str, ...]]  # sha256 -> reasons
    delete: tuple[Candidate, ...]
    bundles: Mapping[str, Candidate]


def plan_prune(
    bundles: Sequence[Candidate],
    references: Mapping[str, Sequence[str]],
    *,
    keep_last: int | None,
    older_than: timedelta | None,
    now: datetime,
) -> PrunePlan:
    """Which of ``bundles`` to delete; ``references`` maps sha256 -> why something points at it."""
    reasons: dict[str, list[str]] = {c.sha256: list(references.get(c.sha256, ())) for c in bundles}
    if keep_last is not None:
        by_config: dict[str | None, list[Candidate]] = {}
        for c in bundles:
            by_config.setdefault(c.config_name, []).append(c)
        for name, group in by_config.items():
            newest = sorted(group, key=lambda c: (c.created, c.sha256), reverse=True)[:keep_last]
            for rank, c in enumerate(newest, start=1):
                reasons[c.sha256].append(f"newest of config {name}: no. {rank} of --keep-last {keep_last}")
    if older_than is not None:
        cutoff = (now - older_than).strftime("%Y-%m-%dT%H:%M:%SZ")
        for c in bundles:
            if c.created >= cutoff:
                reasons[c.sha256].append(f"younger than {cutoff}")
    delete = tuple(sorted((c for c in bundles if not reasons[c.sha256]), key=lambda c: (c.created, c.sha256)))
    keep = {sha: tuple(r) for sha, r in reasons.items() if r}
    return PrunePlan(keep=keep, delete=delete, bundles={c.sha256: c for c in bundles})


def references(catalog: Catalog) -> dict[str, list[str]]:
    """sha256 -> the approvals, golden checks and registered model versions that point at the bundle.

    A reference found on an earlier version of a bundle file (same path, same engine; see
    :data:`~pytest_trt.catalog.store.LINEAGE`) protects the file's current version, which holds that engine.
    """
    current = ("JOIN bundles o ON o.sha256 = t.bundle_sha256 JOIN bundles b ON b.path = o.path "
               "AND b.engine_sha256 = o.engine_sha256 AND b.superseded_by IS NULL AND b.pruned IS NULL")
    refs: dict[str, list[str]] = {}

    def add(sha: str, text: str) -> None:
        if text not in refs.setdefault(sha, []):
            refs[sha].append(text)

    for a in catalog.rows(f"SELECT b.sha256 AS current, t.* FROM approvals t {current} ORDER BY b.sha256, t.test"):
        where = f"{a['golden'] or 'golden'} generation {a['generation']}" if a["generation"] is not None else (
            a["golden"] or "a golden")
        by = f" by {a['approver']}" if a["approver"] else ""
        add(a["current"], f"approval: {where} refreshed from it{by} ({a['test']})")
    last = catalog.rows(
        f"SELECT t.golden, t.generation, max(b.created || ' ' || b.sha256) AS newest FROM verdicts t {current} "
        "WHERE t.golden IS NOT NULL GROUP BY t.golden, t.generation ORDER BY t.golden, t.generation")
    for row in last:
        add(row["newest"].split(" ")[1],
            f"golden history: newest check against {row['golden']} generation {row['generation']}")
    for r in catalog.rows(f"SELECT b.sha256 AS current, t.* FROM registrations t {current} "
                          "ORDER BY b.sha256, t.model_name"):
        add(r["current"], f"registered model version: {r['model_name']} v{r['model_version']} at {r['uri']}")
    return refs


def candidates(catalog: Catalog) -> list[Candidate]:
    """Bundles on disk as far as the catalog knows (not pruned, not replaced by a newer file)."""
    rows = catalog.rows("SELECT sha256, path, config_name, created FROM bundles "
                        "WHERE pruned IS NULL AND superseded_by IS NULL ORDER BY created, sha256")
    return [Candidate(r["sha256"], r["path"], r["config_name"], r["created"]) for r in rows]


def _file_sha256(path: Path) -> str | None:
    try:
        return sha256_file(path)
    except FileNotFoundError:
        return None


@dataclass(frozen=True)
class PruneOutcome:
    deleted: tuple[Candidate, ...]
    skipped: tuple[tuple[Candidate, str], ...]  # (bundle, why it was not deleted after all)


def apply_prune(catalog: Catalog, plan: PrunePlan, *, when: str) -> PruneOutcome:
    """Delete the planned bundles whose file still holds the indexed bytes; mark their rows pruned."""
    deleted: list[Candidate] = []
    skipped: list[tuple[Candidate, str]] = []
    for c in plan.delete:
        actual = _file_sha256(Path(c.path))
        if actual is not None and actual != c.sha256:
            skipped.append((c, f"{c.path} now holds other bytes (sha256 {actual[:16]}); run "
                               "'pytest-trt catalog add' on it first"))
            continue
        if actual is not None:
            os.unlink(c.path)
        # its sidecar describes a file that is gone; its lock file stays (another process may hold it, and a
        # lock file removed under its holder would let a second writer in)
        sidecar_path(Path(c.path)).unlink(missing_ok=True)
        # its attestations go with it (the catalog row keeps their text)
        attestation_path(Path(c.path)).unlink(missing_ok=True)
        bom_path(Path(c.path)).unlink(missing_ok=True)
        deleted.append(c)
    catalog.mark_pruned([c.sha256 for c in deleted], when=when)
    return PruneOutcome(tuple(deleted), tuple(skipped))


def render_plan(plan: PrunePlan, *, dry_run: bool) -> Iterable[str]:
    for sha, why in sorted(plan.keep.items(), key=lambda kv: plan.bundles[kv[0]].created):
        c = plan.bundles[sha]
        yield f"KEEP    {c.path}  ({'; '.join(why)})"
    verb = "WOULD DELETE" if dry_run else "DELETE"
    for c in plan.delete:
        yield f"{verb}  {c.path}  (config {c.config_name}, created {c.created}, nothing refers to it)"
