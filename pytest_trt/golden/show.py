"""``pytest-trt golden show FILE``: datasets, snapshots, provenance and approvals of a golden file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_trt.golden.layout import SnapshotView
from pytest_trt.golden.noise import describe
from pytest_trt.golden.store import GoldenFile, guard


def _arrays(group: Any) -> dict[str, dict[str, Any]]:
    return {k: {"shape": list(v.shape), "dtype": str(v.dtype), "compression": v.compression} for k, v in group.items()}


def _snapshot(s: SnapshotView) -> dict[str, Any]:
    return {"generation": s.generation, "provenance": s.provenance.to_dict(), "baselines": s.baselines,
            "outputs": _arrays(s.outputs), "has_record": "record" in s.group, "noise": s.noise}


def golden_show_json(path: str | Path) -> dict[str, Any]:
    """Everything ``golden show`` prints, as JSON-able data (``--json``)."""
    path = Path(path)
    with GoldenFile(path) as g, guard(path):
        out: dict[str, Any] = {"file": str(path), "dataset": None, "snapshots": {}, "approvals": list(g.approvals())}
        if g.has_dataset:
            tags = g.tags()
            labels = g.labels()
            out["dataset"] = {
                "samples": g.samples, "sha256": g.dataset_sha256, "inputs": _arrays(g.inputs()),
                "labels": None if labels is None else {"count": int(labels.size),
                                                       "classes": int(len(set(labels.tolist())))},
                "tags": None if tags is None else _tag_counts(tags),
            }
        for config in g:
            out["snapshots"][config] = {"current": _snapshot(g[config]),
                                        "history": [_snapshot(h) for h in g.history(config)]}
    return out


def _tag_counts(tags: tuple[str, ...]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in tags:
        for t in (x.strip() for x in text.split(",")):
            if t:
                counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items()))


def golden_show(path: str | Path) -> str:
    """Human-readable summary of a golden file."""
    d = golden_show_json(path)
    lines = [f"golden file: {d['file']}"]
    ds = d["dataset"]
    if ds is None:
        lines.append("dataset: none")
    else:
        lines.append(f"dataset: {ds['samples']} samples, sha256 {ds['sha256'][:16]}")
        lines += [f"  input {k}: {v['dtype']} {tuple(v['shape'])}" for k, v in ds["inputs"].items()]
        if ds["labels"]:
            lines.append(f"  labels: {ds['labels']['count']} ({ds['labels']['classes']} classes)")
        if ds["tags"]:
            lines.append("  tags: " + ", ".join(f"{k}={v}" for k, v in ds["tags"].items()))
    for config, snaps in d["snapshots"].items():
        gens = [h["generation"] for h in snaps["history"]] + [snaps["current"]["generation"]]
        lines.append(f"snapshot {config}: generation {gens[-1]} (generations kept: {', '.join(map(str, gens))})")
        cur = snaps["current"]
        p = cur["provenance"]
        lines.append(f"  backend {p['backend'] or '?'} {p['backend_version']}, created {p['created']}, "
                     f"commit {p.get('git_commit') or '-'}")
        lines.append(f"  device {p['device'] or '?'}")
        lines.append(f"  config {p['config_hash'][:16]}, onnx {p['onnx_sha256'][:16]}, plugin {p['plugin_version']}")
        for k, v in cur["outputs"].items():
            acc = cur["baselines"].get(k, {}).get("accuracy")
            extra = "" if acc is None else f", golden accuracy {acc * 100:.1f}%"
            lines.append(f"  output {k}: {v['dtype']} {tuple(v['shape'])}{extra}")
        lines.append("  " + describe(cur["noise"]))
    lines.append(f"approvals: {len(d['approvals'])}")
    for a in d["approvals"]:
        lines.append(f"  {a.get('time', '?')} {a.get('config', '?')} generation {a.get('generation', '?')} "
                     f"by {a.get('approver', '?')}: {a.get('reason', '')}")
    return "\n".join(lines)
