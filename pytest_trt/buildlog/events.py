"""Fusion groups from the optimizer's fusion events, for logs without a layer listing.

TensorRT 7 (and any log built without ``--profilingVerbosity=detailed``) never
lists the engine's layers; the only evidence of what fused is the optimizer's
own lines: ``Fusing Conv_3 with Relu_4`` and the 7.1.3 horizontal merge
``Merging layers: Conv_3 + Relu_4 || Conv_0 + Relu_1``.  Each event joins the
ONNX nodes of both sides, so the fused layers are the connected components of
the events (union-find).  A side is itself a fused layer name, split into its
members with the same rules as layer names (:mod:`pytest_trt.buildlog.names`).

An unnamed layer of a compute type (``Fusing (Unnamed Layer* 59) [ElementWise] with Relu_54``, a
Python-API or parser-made layer) is a member too: the fusion is real and an assertion may name it.
Unnamed shuffles and constants the parser added stay dropped.  A group is a fusion when it has two
members and at least one named ONNX node.  Diffs key unnamed members without their number
(:func:`unnamed_key`), which shifts between versions.
"""

from __future__ import annotations

import re

from pytest_trt.buildlog.names import origins_from_name, split_name
from pytest_trt.buildlog.record import BuildRecord

#: an unnamed layer of a compute type: a fusion member, unlike the parser's [Shuffle]/[Constant] helpers
_UNNAMED_COMPUTE = re.compile(r"^\(Unnamed Layer\* \d+\) \[(ElementWise|Activation|Convolution|Scale|Pooling|"
                              r"FullyConnected|MatrixMultiply|Unary|Reduce)\]$")
_UNNAMED_NUMBER = re.compile(r"^\(Unnamed Layer\* \d+\)")


def is_unnamed(member: str) -> bool:
    return bool(_UNNAMED_COMPUTE.match(member))


def unnamed_key(member: str) -> str:
    """``(Unnamed Layer* 59) [ElementWise]`` -> ``(Unnamed Layer) [ElementWise]``; named nodes unchanged."""
    return _UNNAMED_NUMBER.sub("(Unnamed Layer)", member) if is_unnamed(member) else member


def _members(side: str) -> tuple[str, ...]:
    # ONNX nodes as in layer names, plus unnamed compute layers; the parser's unnamed shuffles and constants
    # ("(Unnamed Layer* 21) [Shuffle]") are no nodes and stay dropped: an event between two of them joins nothing
    named = origins_from_name(side)
    unnamed = tuple(m.strip() for m in split_name(side) if is_unnamed(m.strip()))
    return tuple(dict.fromkeys(named + unnamed))


def event_groups(record: BuildRecord) -> tuple[tuple[str, ...], ...]:
    """The node sets the fusion events joined, each sorted, in order of first appearance."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for event in record.fusion_events:
        nodes = _members(event.first) + _members(event.second)
        if not nodes:
            continue
        root = find(nodes[0])
        for node in nodes[1:]:
            other = find(node)
            if other != root:
                parent[other] = root
    groups: dict[str, list[str]] = {}
    for node in parent:
        groups.setdefault(find(node), []).append(node)
    return tuple(tuple(sorted(set(g))) for g in groups.values()
                 if len(set(g)) >= 2 and any(not is_unnamed(n) for n in g))


def uses_events(record: BuildRecord) -> bool:
    """True when the record has fusion events but no layer origins: judge fusions by the events."""
    return bool(record.fusion_events) and not record.all_origins()


def fusion_sets(record: BuildRecord) -> tuple[tuple[str, ...], ...]:
    """Sorted ONNX node sets of every fused layer: from the layer listing, else from the events."""
    if uses_events(record):
        return event_groups(record)
    return tuple(tuple(sorted(set(layer.origins))) for layer in record.fusions)
