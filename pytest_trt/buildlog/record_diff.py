"""Structural difference of two build records: what an upgrade or a config change did to the engine.

Layers are matched by (name without Myelin kernel numbering, origins): ``__myl_CorrMulAddMaxMin_myl0_3``
and ``__myl_CorrMulAddMaxMin_myl0_4`` are the same kernel when they implement the same ONNX nodes.
Tactics change between runs on the same GPU (timing noise), so they are masked by default, like
syrupy's matchers mask volatile fields; timings are never compared.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, fields
from typing import Any

from .events import fusion_sets, unnamed_key
from .names import strip_myelin_suffix
from .record import BuildRecord, Layer

_Key = tuple[str, tuple[str, ...]]


def first_line(text: str) -> str:
    """The first line of a message for a one-line listing; an empty message is an empty line."""
    return (text.splitlines() or [""])[0]


def _key(layer: Layer) -> _Key:
    return strip_myelin_suffix(layer.name), tuple(layer.origins)


def _fusion_sets(record: BuildRecord) -> Counter[tuple[str, ...]]:
    # unnamed members are keyed without their number, which shifts between versions
    return Counter(tuple(sorted(unnamed_key(n) for n in s)) for s in fusion_sets(record))


@dataclass(frozen=True)
class RecordDiff:
    """What changed from ``old`` to ``new``; empty tuples/dicts mean no change."""

    fusions_gained: tuple[tuple[str, ...], ...] = ()  # origin sets fused in new, not in old
    fusions_lost: tuple[tuple[str, ...], ...] = ()
    precision_changes: tuple[tuple[str, str | None, str | None], ...] = ()  # (node, old, new), nodes both name
    #: (old node, new node, old precision, new precision): a node only one side names, paired with the other
    #: side's through an output tensor their layers share; one structure change, never a precision change
    replaced_nodes: tuple[tuple[str, str, str | None, str | None], ...] = ()
    layers_added: tuple[str, ...] = ()  # "name [type] <- origins"
    layers_removed: tuple[str, ...] = ()
    reformat_count: tuple[int, int] | None = None  # (old, new) when different
    tactic_changes: tuple[tuple[str, str | None, str | None], ...] = ()  # (layer, old, new), unmasked only
    masked_tactic_changes: int = 0  # how many tactic changes mask_tactics hid
    memory: dict[str, tuple[int | None, int | None]] | None = None  # field -> (old, new) when different
    layer_count: tuple[int, int] | None = None  # engine layers (old, new) when different
    new_warnings: tuple[str, ...] = ()
    gone_warnings: tuple[str, ...] = ()
    versions: tuple[str | None, str | None] | None = None  # backend_version (old, new) when different

    @property
    def is_empty(self) -> bool:
        """True when nothing but masked tactics (and timings, never compared) changed."""
        return not any(getattr(self, f.name) for f in fields(self) if f.name != "masked_tactic_changes")

    @property
    def has_structure_changes(self) -> bool:
        """Fusions, precisions, layers or reformats changed: what a golden's structure check fails on.

        Memory, warnings and versions are reported but are not structure: a
        new allocator estimate must not fail a check whose engine is the same.
        """
        return bool(
            self.fusions_gained or self.fusions_lost or self.precision_changes or self.replaced_nodes
            or self.layers_added
            or self.layers_removed or self.layer_count or self.reformat_count
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["is_empty"] = self.is_empty
        d["has_structure_changes"] = self.has_structure_changes
        return d

    def render(self, *, limit: int = 10) -> str:
        """Short human text, one section per kind of change, each capped at ``limit`` lines."""
        if self.is_empty:
            extra = f" ({self.masked_tactic_changes} tactic change(s) masked)" if self.masked_tactic_changes else ""
            return "build records match" + extra
        out: list[str] = []

        def section(title: str, items: list[str]) -> None:
            if not items:
                return
            out.append(f"{title} ({len(items)}):")
            out.extend(f"  {x}" for x in items[:limit])
            if len(items) > limit:
                out.append(f"  ... {len(items) - limit} more not shown")

        if self.versions:
            out.append(f"backend version: {self.versions[0]} -> {self.versions[1]}")
        section("fusions gained", [" + ".join(s) for s in self.fusions_gained])
        section("fusions lost", [" + ".join(s) for s in self.fusions_lost])
        section("precision changes", [f"{n}: {a} -> {b}" for n, a, b in self.precision_changes])
        section("replaced nodes", [replaced_text(r) for r in self.replaced_nodes])
        section("layers added", list(self.layers_added))
        section("layers removed", list(self.layers_removed))
        if self.layer_count:
            out.append(f"engine layers: {self.layer_count[0]} -> {self.layer_count[1]}")
        if self.reformat_count:
            out.append(f"reformat layers: {self.reformat_count[0]} -> {self.reformat_count[1]}")
        section("tactic changes", [f"{n}: {a} -> {b}" for n, a, b in self.tactic_changes])
        if self.masked_tactic_changes:
            out.append(f"({self.masked_tactic_changes} tactic change(s) masked)")
        section("memory", [f"{k}: {a} -> {b}" for k, (a, b) in (self.memory or {}).items()])
        section("new warnings", [first_line(w)[:160] for w in self.new_warnings])
        section("warnings gone", [first_line(w)[:160] for w in self.gone_warnings])
        return "\n".join(out)


def _describe(layer: Layer) -> str:
    return f"{layer.name} [{layer.type}]" + (f" <- {', '.join(layer.origins)}" if layer.origins else "")


def _layer_changes(old: BuildRecord, new: BuildRecord) -> tuple[list[str], list[str], list[tuple[Layer, Layer]]]:
    olds: dict[_Key, list[Layer]] = {}
    for layer in old.layers:
        olds.setdefault(_key(layer), []).append(layer)
    added: list[str] = []
    paired: list[tuple[Layer, Layer]] = []
    for layer in new.layers:
        bucket = olds.get(_key(layer))
        if bucket:
            paired.append((bucket.pop(0), layer))
        else:
            added.append(_describe(layer))
    removed = [_describe(layer) for bucket in olds.values() for layer in bucket]
    return added, removed, paired


def replaced_text(r: tuple[str, str, str | None, str | None]) -> str:
    """``/l/Relu -> /l/Clip (Float)``, or both precisions when they differ."""
    old, new, pa, pb = r
    return f"{old} -> {new} ({pa if pa == pb else f'{pa} -> {pb}'})"


def _producers(record: BuildRecord) -> dict[str, set[str]]:
    """ONNX node -> names of the tensors its layers output."""
    out: dict[str, set[str]] = {}
    for layer in record.layers:
        names = {t.name for t in layer.outputs}
        for node in layer.origins:
            out.setdefault(node, set()).update(names)
    return out


def _replaced(old: BuildRecord, new: BuildRecord, po: dict[str, str], pn: dict[str, str]
              ) -> tuple[tuple[str, str, str | None, str | None], ...]:
    """Nodes only one side names, paired through a shared output tensor (first match, each node once)."""
    only_old, only_new = sorted(set(po) - set(pn)), sorted(set(pn) - set(po))
    if not only_old or not only_new:
        return ()
    ta, tb = _producers(old), _producers(new)
    pairs: list[tuple[str, str, str | None, str | None]] = []
    taken: set[str] = set()
    for a in only_old:
        for b in only_new:
            if b not in taken and ta.get(a, set()) & tb.get(b, set()):
                pairs.append((a, b, po.get(a), pn.get(b)))
                taken.add(b)
                break
    return tuple(pairs)


def _memory(old: BuildRecord, new: BuildRecord) -> dict[str, tuple[int | None, int | None]]:
    a, b = asdict(old.memory), asdict(new.memory)
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


def diff_records(old: BuildRecord, new: BuildRecord, *, mask_tactics: bool = True) -> RecordDiff:
    """Compare two records; see :class:`RecordDiff` for the fields."""
    fo, fn = _fusion_sets(old), _fusion_sets(new)
    po, pn = old.node_precisions, new.node_precisions
    # a node only one side names is a layer added or removed (or a replaced node), not a precision change
    precision = tuple((n, po[n], pn[n]) for n in sorted(set(po) & set(pn)) if po[n] != pn[n])
    added, removed, paired = _layer_changes(old, new)
    tactics = [(b.name, a.tactic, b.tactic) for a, b in paired if a.tactic != b.tactic]
    ow = {m.text for m in old.warnings}
    nw = {m.text for m in new.warnings}
    return RecordDiff(
        fusions_gained=tuple(sorted((fn - fo).elements())),
        fusions_lost=tuple(sorted((fo - fn).elements())),
        precision_changes=precision,
        replaced_nodes=_replaced(old, new, po, pn),
        layers_added=tuple(added),
        layers_removed=tuple(removed),
        reformat_count=(old.reformat_count, new.reformat_count) if old.reformat_count != new.reformat_count else None,
        tactic_changes=() if mask_tactics else tuple(tactics),
        masked_tactic_changes=len(tactics) if mask_tactics else 0,
        memory=_memory(old, new) or None,
        layer_count=(len(old.layers), len(new.layers)) if len(old.layers) != len(new.layers) else None,
        new_warnings=tuple(m.text for m in new.warnings if m.text not in ow),
        gone_warnings=tuple(m.text for m in old.warnings if m.text not in nw),
        versions=(old.backend_version, new.backend_version) if old.backend_version != new.backend_version else None,
    )
