"""Which ONNX nodes of a record a node pattern names, and how failure messages show layers.

Node names match exactly, by glob (``block1/*``, any of ``*?[``) or by regex with a ``re:``
prefix (``re:block\\d/conv_dw``, full match).  A name that matches no ONNX node the record
knows raises :class:`UnknownNodeError` with the closest names.  Shared by the record assertions
(:mod:`.assertions`, :mod:`.calibration_assertions`).
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable

from ..errors import UnknownNodeError
from .events import event_groups, uses_events
from .record import BuildRecord, Layer

MAX_LAYERS_SHOWN = 8


def _match(known: tuple[str, ...], pattern: str) -> tuple[str, tuple[str, ...]]:
    if pattern.startswith("re:"):
        try:
            rx = re.compile(pattern[3:])
        except re.error as e:
            raise ValueError(f"bad regex in node pattern {pattern!r}: {e}") from None
        return "regex", tuple(n for n in known if rx.fullmatch(n))
    if pattern in known:  # exact first: "(Unnamed Layer* 11) [Shuffle]" would otherwise read as a glob
        return "exact", (pattern,)
    if any(c in pattern for c in "*?["):
        return "glob", tuple(n for n in known if fnmatch.fnmatchcase(n, pattern))
    return "exact", ()


def resolve_nodes(record: BuildRecord, pattern: str, *, label: str = "engine") -> tuple[str, ...]:
    """The ONNX node names of ``record`` that ``pattern`` matches; UnknownNodeError when none."""
    __tracebackhide__ = True
    known = record.all_origins() or _event_nodes(record)
    how, hits = _match(known, pattern)
    if hits:
        return hits
    if not known:
        raise AssertionError(
            f"{label}: the build record lists no ONNX nodes (source {record.source!r}, {len(record.layers)} layers), "
            f"so {pattern!r} cannot be checked.\nBuild with ProfilingVerbosity.DETAILED (trtexec "
            "--profilingVerbosity=detailed --verbose) so the log carries the layer listing."
        )
    close = difflib.get_close_matches(pattern.removeprefix("re:"), known, n=5, cutoff=0.4)
    lines = [f"{label}: no ONNX node matches {pattern!r} ({how} match against {len(known)} nodes)."]
    if uses_events(record):
        lines.append("This log has no layer listing: only the nodes named in its fusion events are known.")
    if close:
        lines.append("Closest names: " + ", ".join(repr(c) for c in close))
    lines.append("Use the ONNX node name (as in Netron), a glob like 'block1/*', or a regex like 're:block\\d+/relu6'.")
    raise UnknownNodeError("\n".join(lines), name=pattern, candidates=close)


def _event_nodes(record: BuildRecord) -> tuple[str, ...]:
    """Every node a fusion event names, for logs without a layer listing (TensorRT 7)."""
    if not uses_events(record):
        return ()
    return tuple(dict.fromkeys(n for g in event_groups(record) for n in g))


def describe_layer(layer: Layer) -> str:
    """One layer as shown in failure messages."""
    dtypes = ",".join(t.dtype or "?" for t in layer.outputs) or "?"
    text = (f"  [{layer.kind}] {layer.name}\n      type={layer.type} tactic={layer.tactic or '-'} "
            f"out dtypes={dtypes} precision={layer.precision or '?'}\n      origins={list(layer.origins)}")
    if layer.subgraph:
        text += f"\n      subgraph={layer.subgraph}"
    return text


def describe(layers: Iterable[Layer]) -> str:
    """Layers as failure messages show them, at most MAX_LAYERS_SHOWN."""
    layers = list(layers)
    shown = [describe_layer(layer) for layer in layers[:MAX_LAYERS_SHOWN]]
    if len(layers) > MAX_LAYERS_SHOWN:
        shown.append(f"  ... and {len(layers) - MAX_LAYERS_SHOWN} more layers (not shown)")
    return "\n".join(shown) if shown else "  (none)"


def layers_with(record: BuildRecord, nodes: Iterable[str]) -> list[Layer]:
    wanted = set(nodes)
    return [layer for layer in record.layers if wanted & set(layer.origins)]
