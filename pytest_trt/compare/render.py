"""Failure and summary text for golden comparisons.

One message per failing check: a header naming the golden, every breached
threshold as a ``[REGRESSION]`` line (the seed incident's form), a capped
per-output table, and the exact command that refreshes the golden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_trt.compare.rules import RULES
from pytest_trt.compare.verdict import FAIL, Breach, MetricCheck, OutputMetrics, num, pct
from pytest_trt.options import APPROVE_OPT, ENGINE_BUILD_OPT, UPDATE_GOLDEN_OPT

MAX_BREACH_LINES = 30
MAX_TABLE_ROWS = 12


def update_command(nodeid: str | None = None, reason: str = "REASON", args: Sequence[str] = ()) -> str:
    """The command that writes an approved snapshot (for ``nodeid`` when known).

    ``args`` are the session's options that choose the engine (``--trt-backend onnxruntime``):
    without them the command would refresh another backend's golden, or none.
    """
    words = ["pytest", *([nodeid] if nodeid else []), *args,
             ENGINE_BUILD_OPT.arg(), UPDATE_GOLDEN_OPT.arg(), APPROVE_OPT.arg(reason, placeholder=True)]
    return " ".join(words)


def _cap(lines: Sequence[str], limit: int, what: str) -> list[str]:
    if len(lines) <= limit:
        return list(lines)
    return [*lines[:limit], f"... {len(lines) - limit} more {what} not shown"]


def _opt(x: float | None, fmt: str = "num") -> str:
    if x is None:
        return "-"
    return pct(x) if fmt == "pct" else num(x)


def metrics_table(metrics: Sequence[OutputMetrics]) -> list[str]:
    """Aligned per-output figures, one column per rule that has one, at most :data:`MAX_TABLE_ROWS` rows."""
    columns = [r for r in RULES if r.column is not None]
    header = ("output", "samples", *(str(r.column) for r in columns))
    rows = [header]
    for m in metrics[:MAX_TABLE_ROWS]:
        rows.append((m.name, str(m.samples), *(r.text(m) for r in columns)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if len(metrics) > MAX_TABLE_ROWS:
        lines.append(f"  ... {len(metrics) - MAX_TABLE_ROWS} more outputs not shown")
    return lines


def tag_table(metrics: Sequence[OutputMetrics]) -> list[str]:
    lines = []
    for m in metrics:
        for t in m.tags:
            acc = "" if t.accuracy is None else f", accuracy {_opt(t.golden_accuracy, 'pct')} -> {pct(t.accuracy)}"
            lines.append(f"  {m.name}[tag={t.tag}]: {t.count} samples, top-1 agreement {pct(t.agreement)}{acc}")
    return _cap(lines, MAX_TABLE_ROWS, "tag rows")


def render_regression(
    *,
    golden: str,
    breaches: Sequence[Breach],
    metrics: Sequence[OutputMetrics],
    structure: str | None = None,
    problems: Sequence[str] = (),
    nodeid: str | None = None,
    command_args: Sequence[str] = (),
    checks: Sequence[MetricCheck] = (),
    refused: Sequence[str] = (),
) -> str:
    """The one failure message of a check: problems, refusals, breaches, every other metric, tables, next step."""
    lines = [f"golden check failed: {golden}"]
    lines += [f"[GOLDEN] {p}" for p in problems]
    lines += [f"[REFUSED] {r}" for r in refused]
    lines += _cap([b.line() for b in breaches], MAX_BREACH_LINES, "breached thresholds")
    others = [c.line() for c in checks if c.status != FAIL]
    if others:
        lines.append("Other metrics checked:")
        lines += ["  " + line for line in _cap(others, MAX_BREACH_LINES, "metric lines")]
    if structure:
        lines.append("[STRUCTURE] the engine's structure differs from the golden's:")
        lines += ["  " + s for s in _cap(structure.splitlines(), MAX_BREACH_LINES, "structure lines")]
    if metrics:
        lines.append("Per-output figures (obtained vs golden):")
        lines += metrics_table(metrics)
        lines += tag_table(metrics)
    if refused and not (breaches or problems or structure):
        lines.append("The outputs are not the problem: a threshold that cannot be evaluated never passes. Change it "
                     "in check(), or replace the golden dataset with a labelled one through an approved update.")
        return "\n".join(lines)
    lines.append("If this change is expected and approved, refresh the golden with a recorded reason:")
    lines.append("  " + update_command(nodeid, args=command_args))
    return "\n".join(lines)


def render_deltas(label: str, deltas: Mapping[str, OutputMetrics], *, previous: int = 0,
                  dataset_changed: bool = False) -> list[str]:
    """One line per output of what an approved refresh changed (generation ``previous`` -> new)."""
    if not deltas:
        if previous < 1:
            return [f"{label}: new snapshot (no previous generation to compare)"]
        if dataset_changed:
            return [f"{label}: new golden dataset; generation {previous} ran other inputs, so its outputs are not "
                    "comparable (the approval records both provenances)"]
        return [f"{label}: generation {previous} holds none of these outputs with these shapes: nothing to compare"]
    out = []
    for name, m in deltas.items():
        parts = [text for r in RULES if r.delta is not None and (text := r.delta(m)) is not None]
        out.append(f"{label}: {name}: " + ", ".join(parts))
    return out
