"""Plain-text tables of catalog rows: fixed columns, the bundle file always last and in full."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pytest_trt.catalog.credentials import redact

QUERY_COLUMNS = (
    ("created", "created"),
    ("config", "config"),
    ("backend", "backend"),
    ("device", "device"),
    ("calibration", "calibration"),
    ("verdicts", "verdicts"),
    ("engine sha256", "engine"),
    ("bundle", "path"),
)


def _cell(row: dict[str, Any], key: str) -> str:
    if key == "config":
        return f"{row.get('config_name') or '?'} v{row.get('config_version') or '?'}"
    if key == "backend":
        return f"{row.get('backend') or '?'} {row.get('backend_version') or '?'}"
    if key == "engine":
        return str(row.get("engine_sha256") or "")[:16]
    if key == "calibration":
        return str(row.get("calibration_algorithm") or "-")
    if key == "verdicts":
        text = str(row.get("verdicts") or "-")
        return text + (f" ({row['approvals']} approval{'s' if row['approvals'] != 1 else ''})"
                       if row.get("approvals") else "")
    value = row.get(key)
    return "-" if value is None else str(value)


def table(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, str]] = QUERY_COLUMNS) -> list[str]:
    """The title line, then a line per row (``rows`` is read once: only the cells are kept)."""
    cells = [[_cell(r, key) for _, key in columns] for r in rows]
    widths = [max([len(title)] + [len(c[i]) for c in cells]) for i, (title, _) in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return [line([t for t, _ in columns]), *(line(c) for c in cells)]


def show_lines(row: dict[str, Any], details: dict[str, list[dict[str, Any]]]) -> list[str]:
    dirty = {None: "", 0: "", 1: " (dirty)"}.get(row.get("git_dirty"), "")
    signer = row.get("signer_key_sha256")
    sig = ("unsigned" if not signer else
           f"key sha256:{signer[:16]} ({'checked' if row.get('signature_checked') else 'not checked at indexing'})")
    state = ("pruned " + row["pruned"] if row.get("pruned") else
             f"superseded by {row['superseded_by'][:16]}" if row.get("superseded_by") else "current")
    lines = [
        f"bundle: {row['path']}",
        f"sha256: {row['sha256']}  ({row['size']:,} bytes, {state})",
        f"config: {row.get('config_name')} v{row.get('config_version')}  hash {row.get('config_hash')}",
        f"config.json sha256: {row.get('config_sha256')}",
        f"onnx sha256: {row.get('onnx_sha256')}",
        f"engine sha256: {row['engine_sha256']} ({'in bundle' if row.get('engine_included') else 'hash only'})",
        f"backend: {row.get('backend')} {row.get('backend_version')}",
        f"device: {row.get('device')}  {row.get('device_json')}",
        f"cuda: runtime {row.get('cuda_runtime') or '-'}, driver {row.get('cuda_driver') or '-'}",
        f"calibration: {row.get('calibration_algorithm') or '-'}, "
        f"cache sha256 {row.get('calibration_cache_sha256') or '-'}",
        f"git: {row.get('git_commit') or '-'}{dirty}",
        f"created: {row['created']}  indexed: {row['indexed']}",
        f"signature: {sig}",
    ]
    verdicts = details.get("verdicts", [])
    lines.append(f"golden verdicts: {len(verdicts)}" if verdicts else "golden verdicts: none")
    for v in verdicts:
        metrics = ", ".join(f"{k} {val:g}" for k, val in sorted(v["metrics"].items()))
        gen = f" generation {v['generation']}" if v.get("generation") is not None else ""
        lines.append(f"  {v['test']}: {v['verdict']}{' ' + v['golden'] if v.get('golden') else ''}{gen}"
                     + (f"  [{metrics}]" if metrics else ""))
    for a in details.get("approvals", []):
        lines.append(f"approval: {a['test']} -> {a.get('golden')} generation {a.get('generation')}"
                     f"{' by ' + a['approver'] if a.get('approver') else ''}"
                     f"{': ' + a['reason'] if a.get('reason') else ''}")
    for p in details.get("pushes", []):
        lines.append(f"mlflow run: {p['run_id']} in experiment {p['experiment']} at {redact(p['uri'])} ({p['time']})")
    for r in details.get("registrations", []):
        lines.append(f"registered model: {r['model_name']} version {r['model_version']} at {redact(r['uri'])}")
    return lines


def history_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for row in rows:
        lines.append(f"{row['created']}  v{row.get('config_version')}  {row.get('backend')} "
                     f"{row.get('backend_version')}  {row.get('device')}  engine {str(row['engine_sha256'])[:16]}")
        lines.append(f"  bundle: {row['path']}")
        for v in row.get("verdict_rows", []):
            metrics = ", ".join(f"{k} {val:g}" for k, val in sorted(v["metrics"].items()))
            lines.append(f"  verdict: {v['verdict']}  {v['test']}" + (f"  [{metrics}]" if metrics else ""))
        for a in row.get("approval_rows", []):
            lines.append(f"  approval: {a.get('golden')} generation {a.get('generation')}"
                         f"{' by ' + a['approver'] if a.get('approver') else ''}"
                         f"{': ' + a['reason'] if a.get('reason') else ''}")
        for r in row.get("registrations", []):
            lines.append(f"  registered: {r['model_name']} version {r['model_version']}")
    return lines
