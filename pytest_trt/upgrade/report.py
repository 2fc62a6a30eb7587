"""``pytest-trt upgrade-report``: read both runs, pair, review, write the HTML, print the summary."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_trt.audit.facts import FactsReader
from pytest_trt.upgrade.model import (
    CHANGED_UNCHECKED,
    REGRESSION,
    UNCHANGED,
    ConfigReview,
    UpgradeReport,
    build_report,
)
from pytest_trt.upgrade.pairing import VERIFY_STAGE, load_run, pair_runs


def make_report(old: str, new: str, *, mask_tactics: bool = True, localize: bool = False,
                allow_unchecked: bool = False, quant_errors: bool = True, cache_dir: Path | None = None,
                golden_dir: Path | None = None, reader: FactsReader | None = None) -> UpgradeReport:
    """The review of run ``old`` against run ``new`` (folders, bundles, or comma-joined bundles).

    ``quant_errors``: per-tensor quantization errors of every regressed calibrated config
    (:mod:`pytest_trt.upgrade.quant_errors`); ``cache_dir``: the engine cache, where stored Q/DQ models are
    looked up when they cannot be rebuilt; ``golden_dir``: where goldens are looked for when a bundle's path
    is gone; ``reader``: how bundles are read (verified facts, or a full verification).
    """
    reader = reader or FactsReader()  # one reader for both runs: a file in both is read once
    pairing = pair_runs(load_run(old, reader), load_run(new, reader))
    report = build_report(pairing, old_label=old, new_label=new, mask_tactics=mask_tactics,
                          allow_unchecked=allow_unchecked)
    if localize:
        from pytest_trt.upgrade.localize import localize_report

        report = localize_report(report, cache_dir=cache_dir)
    if quant_errors and any(r.verdict == REGRESSION for r in report.reviews):
        from pytest_trt.upgrade.quant_errors import quant_errors_report

        report = quant_errors_report(report, cache_dir=cache_dir, golden_dir=golden_dir)
    return report


def localization_line(loc: Mapping[str, Any]) -> str:
    """The localization's one line: the node (and what it replaced, or the Q/DQ it is), or why none."""
    if not loc.get("node"):
        return f"not localized: {loc.get('reason') or loc.get('note')}"
    what = f"first diverging ONNX node: {loc['node']}"
    if loc.get("replaces"):
        what += f" (replaced: {loc['replaces']} -> {loc['node']})"
    if loc.get("qdq"):
        what += f"; {loc['qdq']}"
    return (what + f" (fusion group {' + '.join(loc.get('group') or [])}; {loc.get('compared')}, "
            f"{loc.get('steps')} runs)")


def toolchain_line(r: ConfigReview) -> str | None:
    if r.toolchain is None or r.toolchain[0] == r.toolchain[1]:
        return None
    return f"toolchain: {r.toolchain[0]} -> {r.toolchain[1]}"


def summary_lines(report: UpgradeReport, *, html: Path | None = None, digest: str | None = None) -> list[str]:
    """The short terminal summary: one line per config, verdict first; unchanged configs add nothing else."""
    lines = [f"upgrade review: {report.old_label} -> {report.new_label}"]
    for r in report.reviews:
        lines.append(f"{r.verdict.upper():<30} {r.title}")
        tool = toolchain_line(r)
        if tool is not None:
            lines.append(f"    {tool}")
        if r.verdict != UNCHANGED:
            lines += [f"    {reason}" for reason in r.reasons[:5]]
            if r.localization:
                lines.append(f"    {localization_line(r.localization)}")
            if r.quant_errors:
                from pytest_trt.upgrade.quant_errors import summary_line

                lines.append(f"    {summary_line(r.quant_errors)}")
            d = r.structure
            if r.verdict == REGRESSION and d is not None and d.has_structure_changes:
                bits = [f"{len(d.fusions_gained)} fusions gained", f"{len(d.fusions_lost)} lost",
                        f"{len(d.precision_changes)} precision changes"]
                if d.replaced_nodes:
                    bits.append(f"{len(d.replaced_nodes)} replaced nodes")
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
        if report.allow_unchecked or not any(r.verdict == CHANGED_UNCHECKED for r in report.reviews):
            lines.append(f"approve with: --trt-approve REASON --trt-approve-report {html}")
        else:  # nothing to approve: outputs that were never checked
            lines.append("no approval: outputs were not checked (run the golden checks, or --allow-unchecked)")
    return lines


def write_html(report: UpgradeReport, path: Path, *, tactics: bool = False) -> str:
    """Write the HTML atomically; return its sha256."""
    from pytest_trt.common.fileio import write_bytes_atomic
    from pytest_trt.upgrade.html import render_html

    data = render_html(report, tactics=tactics, html_name=path.name).encode("utf-8")
    write_bytes_atomic(path, data)
    return hashlib.sha256(data).hexdigest()

