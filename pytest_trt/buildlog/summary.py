"""Short, JSON-able summaries of a BuildRecord, shared by the report section and the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.buildlog.record import BuildRecord


def precision_summary(record: BuildRecord) -> dict[str, int]:
    """Compute layers per precision (``{"Float": 40, "Half": 3}``), most common first."""
    return record.precision_counts()


def format_precisions(summary: dict[str, int]) -> str:
    return ", ".join(f"{dtype} {n}" for dtype, n in summary.items()) or "none listed"


def record_summary(record: BuildRecord) -> dict[str, Any]:
    """The facts a reviewer looks at first: counts, precisions, memory, warnings.

    ``fusions`` counts fused layers as every reader counts them (:func:`~pytest_trt.buildlog.events.fusion_sets`):
    from the layer listing, or from the fusion events of a log without one.
    """
    from pytest_trt.buildlog.events import fusion_sets

    memory = {k: v for k, v in vars(record.memory).items() if v is not None}
    return {
        "source": record.source,
        "backend": record.backend,
        "backend_version": record.backend_version,
        "layers": len(record.layers),
        "compute_layers": sum(1 for layer in record.layers if layer.kind == "compute"),
        "reformat_layers": record.reformat_count,
        "fusions": len(fusion_sets(record)),
        "fusion_events": len(record.fusion_events),
        "subgraphs": len(record.subgraphs),
        "precisions": precision_summary(record),
        "layer_counts": dict(record.layer_counts),
        "memory": memory,
        "warnings": len(record.warnings),
        "errors": len(record.errors),
        "calibration_lines": len(record.calibration),
        "origins_exact": record.origins_exact,
        "total_lines": record.total_lines,
        "unparsed_lines": record.unparsed_lines,
        "builds": record.builds,
    }


def render_record_summary(summary: dict[str, Any], *, max_items: int = 10) -> list[str]:
    lines = [
        f"record: {summary['source']} " + (
            f"({summary['backend']} {summary['backend_version'] or 'version not named'}"
            + (f", from {summary['backend_from']})" if summary.get("backend_from") else ")")
            if summary["backend"] else "(backend and version not named in the log)"),
        f"layers: {summary['layers']} ({summary['compute_layers']} compute, {summary['reformat_layers']} reformat), "
        f"fusions: {summary['fusions']}, subgraphs: {summary['subgraphs']}",
        f"precisions: {format_precisions(summary['precisions'])}",
    ]
    if summary["layer_counts"]:
        counts = list(summary["layer_counts"].items())
        shown = ", ".join(f"{k} {v}" for k, v in counts[:max_items])
        more = f" (+{len(counts) - max_items} more)" if len(counts) > max_items else ""
        lines.append(f"layer counts: {shown}{more}")
    if summary["memory"]:
        lines.append("memory: " + ", ".join(f"{k} {v}" for k, v in summary["memory"].items()))
    lines.append(
        f"warnings: {summary['warnings']}, errors: {summary['errors']}, "
        f"log lines: {summary['total_lines']} ({summary['unparsed_lines']} not understood)"
    )
    if summary.get("builds", 1) > 1:
        lines.append(f"builds in this log: {summary['builds']}; the record is the last build's "
                     "(its layers, fusions and layer counts; warnings of all)")
    return lines


def read_log_record(path: Path, onnx: Any = None) -> BuildRecord:
    """A BuildRecord from any TensorRT verbose log on disk; ``onnx``: a path, ModelProto or OnnxIndex."""
    from pytest_trt.buildlog.readers import read_log

    return read_log(path, onnx=onnx)
