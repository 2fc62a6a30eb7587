"""``pytest-trt upgrade-report``: read both runs, pair, review, write the HTML, print the summary."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytest_trt.audit.facts import FactsReader
from pytest_trt.upgrade.model import REGRESSION, UNCHANGED, UpgradeReport, build_report
from pytest_trt.upgrade.pairing import VERIFY_STAGE, load_run, pair_runs


def make_report(old: str, new: str, *, mask_tactics: bool = True, localize: bool = False,
                reader: FactsReader | None = None) -> UpgradeReport:
    """The review of run ``old`` against run ``new`` (folders, bundles, or comma-joined bundles)."""
    reader = reader or FactsReader()  # one reader for both runs: a file in both is read once
    pairing = pair_runs(load_run(old, reader), load_run(new, reader))
    report = build_report(pairing, old_label=old, new_label=new, mask_tactics=mask_tactics)
    if localize:
        from pytest_trt.upgrade.localize import localize_report

        report = localize_report(report)
    return report


def summary_lines(report: UpgradeReport, *, html: Path | None = None, digest: str | None = None) -> list[str]:
    """The short terminal summary: one line per config, verdict first; unchanged configs add nothing else."""
    lines = [f"upgrade review: {report.old_label} -> {report.new_label}"]
    for r in report.reviews:
        lines.append(f"{r.verdict.upper():<30} {r.title}")
        if r.verdict != UNCHANGED:
            lines += [f"    {reason}" for reason in r.reasons[:5]]
            loc = r.localization
            if loc:
                lines.append(f"    first diverging ONNX node: {loc['node']} (fusion group "
                             f"{' + '.join(loc.get('group') or [])}; {loc.get('compared')}, {loc.get('steps')} runs)"
                             if loc.get("node") else f"    {loc.get('note')}")
            d = r.structure
            if r.verdict == REGRESSION and d is not None and d.has_structure_changes:
                bits = [f"{len(d.fusions_gained)} fusions gained", f"{len(d.fusions_lost)} lost",
                        f"{len(d.precision_changes)} precision changes"]
                if d.layer_count:
                    bits.append(f"layers {d.layer_count[0]} -> {d.layer_count[1]}")
                lines.append("    structure: " + ", ".join(bits))
    for where, sides in (("OLD", report.only_old), ("NEW", report.only_new)):
        for s in sides:
            lines.append(f"ONLY IN {where}                    {s.name} v{s.version} ({s.file})")
            if s.failure is not None and s.failure.get("stage") == VERIFY_STAGE:
                lines.append(f"    {s.failure.get('message')}")
    counts = ", ".join(f"{n} {v}" for v, n in report.counts.items() if n) or "no paired configs"
    lines.append(f"{counts}; {len(report.only_old) + len(report.only_new)} unpaired")
    if html is not None:
        lines.append(f"report: {html}  sha256 {digest}")
        lines.append(f"approve with: --trt-approve REASON --trt-approve-report {html}")
    return lines


def write_html(report: UpgradeReport, path: Path, *, tactics: bool = False) -> str:
    """Write the HTML atomically; return its sha256."""
    from pytest_trt.common.fileio import write_bytes_atomic
    from pytest_trt.upgrade.html import render_html

    data = render_html(report, tactics=tactics).encode("utf-8")
    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()

