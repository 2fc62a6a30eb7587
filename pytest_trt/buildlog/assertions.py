"""Assertions on a :class:`BuildRecord`: the one definition of each, registered with ``@record_assertion``.

Each function here is the record form (``pytest_trt.buildlog.assert_no_fusion(record, ...)``);
:mod:`pytest_trt.buildlog.registry` derives the ``Engine`` method and the module-level function
(``pytest_trt.assert_no_fusion(...)``, the current test's engine) from it.

Node names match exactly, by glob (``block1/*``, any of ``*?[``) or by regex with a ``re:``
prefix (``re:block\\d/conv_dw``, full match).  A name that matches no ONNX node the record
knows raises :class:`UnknownNodeError` with the closest names.  Failures show the engine
layers involved with their full origin lists, types, tactics and dtypes, and say what to do next.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UnknownNodeError
from .events import event_groups, uses_events
from .record import BuildRecord, Layer
from .registry import Subject, record_assertion, subject_label

if TYPE_CHECKING:
    from typing_extensions import Unpack

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


def _groups_holding_all(record: BuildRecord, groups: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [g for g in event_groups(record) if all(set(want) & set(g) for want in groups)]


def _describe_groups(record: BuildRecord, found: Sequence[tuple[str, ...]]) -> str:
    text = "\n".join(f"  fused by the log's fusion events: {' + '.join(g)}" for g in found[:MAX_LAYERS_SHOWN])
    return (text or "  (none)") + f"\n  (the log has no layer listing; {len(record.fusion_events)} fusion events read)"


def describe_layer(layer: Layer) -> str:
    """One layer as shown in failure messages."""
    dtypes = ",".join(t.dtype or "?" for t in layer.outputs) or "?"
    text = (f"  [{layer.kind}] {layer.name}\n      type={layer.type} tactic={layer.tactic or '-'} "
            f"out dtypes={dtypes} precision={layer.precision or '?'}\n      origins={list(layer.origins)}")
    if layer.subgraph:
        text += f"\n      subgraph={layer.subgraph}"
    return text


def _describe(layers: Iterable[Layer]) -> str:
    layers = list(layers)
    shown = [describe_layer(layer) for layer in layers[:MAX_LAYERS_SHOWN]]
    if len(layers) > MAX_LAYERS_SHOWN:
        shown.append(f"  ... and {len(layers) - MAX_LAYERS_SHOWN} more layers (not shown)")
    return "\n".join(shown) if shown else "  (none)"


def _layers_with(record: BuildRecord, nodes: Iterable[str]) -> list[Layer]:
    wanted = set(nodes)
    return [layer for layer in record.layers if wanted & set(layer.origins)]


def _holding_all(record: BuildRecord, groups: Sequence[tuple[str, ...]]) -> list[Layer]:
    return [layer for layer in record.layers if layer.kind == "compute"
            and all(set(g) & set(layer.origins) for g in groups)]


def _need_two(nodes: Sequence[str], what: str) -> None:
    if len(nodes) < 2:
        raise TypeError(f"{what} needs at least two node names, got {list(nodes)}")


@record_assertion
def assert_fused(record: BuildRecord, *nodes: str, **on: Unpack[Subject]) -> None:
    """All ``nodes`` are implemented by one engine layer (each pattern matched by one of its origins)."""
    __tracebackhide__ = True
    label = subject_label(on)
    _need_two(nodes, "assert_fused")
    groups = [resolve_nodes(record, n, label=label) for n in nodes]
    events = uses_events(record)
    if (_groups_holding_all(record, groups) if events else _holding_all(record, groups)):
        return
    wanted = {n for g in groups for n in g}
    shown = (_describe_groups(record, [g for g in event_groups(record) if wanted & set(g)]) if events
             else _describe(_layers_with(record, wanted)))
    raise AssertionError(
        f"{label}: expected {', '.join(map(repr, nodes))} fused into one layer, but no layer holds all of them.\n"
        f"Layers implementing them:\n{shown}\n"
        "Next: check the fusion pass lines of the build log (record.fusion_events); if the split is acceptable "
        "for this TensorRT version, relax the test, otherwise pin the version that fused them."
    )


@record_assertion
def assert_no_fusion(record: BuildRecord, *nodes: str, **on: Unpack[Subject]) -> None:
    """No engine layer implements all of ``nodes`` together."""
    __tracebackhide__ = True
    label = subject_label(on)
    _need_two(nodes, "assert_no_fusion")
    groups = [resolve_nodes(record, n, label=label) for n in nodes]
    if uses_events(record):
        found = _groups_holding_all(record, groups)
        count, shown = len(found), _describe_groups(record, found)
    else:
        offenders = _holding_all(record, groups)
        count, shown = len(offenders), _describe(offenders)
    if not count:
        return
    raise AssertionError(
        f"{label}: expected {', '.join(map(repr, nodes))} NOT to be fused, "
        f"but {count} layer(s) hold all of them:\n"
        f"{shown}\n"
        "Next: this fusion changes the numerics the model was approved with; re-validate accuracy and approve "
        "the new engine, or build with a TensorRT version / builder setting that keeps them apart."
    )


@record_assertion
def assert_precision(record: BuildRecord, node: str, dtype: str, **on: Unpack[Subject]) -> None:
    """Every compute layer implementing ``node`` outputs ``dtype``.

    ``dtype`` in any usual spelling: "fp16"/"half"/"Half", "fp32"/"float", "bf16", "int8", "fp8" ...
    """
    __tracebackhide__ = True
    # imported here: the listing readers compile the log dialects' patterns, which a cache hit never needs
    from .listings import canonical_dtype

    label = subject_label(on)
    want = canonical_dtype(dtype)
    if want is None:
        raise ValueError(f"unknown dtype {dtype!r}; use one of fp32/float, fp16/half, bf16, int8, fp8, int32, int64")
    names = resolve_nodes(record, node, label=label)
    if uses_events(record):
        raise AssertionError(
            f"{label}: {node!r} cannot be checked for {want}: the log has no layer listing (only fusion events), "
            "so it states no per-layer precision.\nBuild with ProfilingVerbosity.DETAILED (trtexec "
            "--profilingVerbosity=detailed --verbose) so the log carries the layer listing."
        )
    layers = [layer for layer in _layers_with(record, names) if layer.kind == "compute"]
    wrong = [layer for layer in layers if layer.precision != want]
    if layers and not wrong:
        return
    why = "no compute layer implements it" if not layers else f"{len(wrong)} of {len(layers)} layer(s) differ"
    raise AssertionError(
        f"{label}: expected {node!r} in {want}, but {why}:\n{_describe(wrong or _layers_with(record, names))}\n"
        "Next: check the builder precision flags and per-layer constraints; a precision change needs an "
        "accuracy re-check against the golden outputs."
    )


@record_assertion
def assert_layer_count(record: BuildRecord, min: int | None = None, max: int | None = None,  # noqa: A002
                       **on: Unpack[Subject]) -> None:
    """The engine has between ``min`` and ``max`` layers (inclusive; both optional)."""
    __tracebackhide__ = True
    label = subject_label(on)
    n = len(record.layers)
    if (min is None or n >= min) and (max is None or n <= max):
        return
    kinds = {k: sum(1 for layer in record.layers if layer.kind == k) for k in ("compute", "reformat", "helper")}
    bound = f">= {min}" if min is not None and n < min else f"<= {max}"
    raise AssertionError(
        f"{label}: expected {bound} engine layers, got {n} "
        f"({kinds['compute']} compute, {kinds['reformat']} reformat, {kinds['helper']} helper).\n"
        f"Layers:\n{_describe(record.layers)}\n"
        "Next: compare with the golden record (diff_records) to see which fusions or reformats changed."
    )


def _warning_hits(record: BuildRecord, pattern: str) -> list[str]:
    if pattern.startswith("re:"):
        rx = re.compile(pattern[3:])
        return [m.text for m in record.warnings if rx.search(m.text)]
    return [m.text for m in record.warnings if pattern in m.text]


@record_assertion
def assert_warning(record: BuildRecord, pattern: str, **on: Unpack[Subject]) -> None:
    """Some builder WARNING contains ``pattern`` (substring; ``re:`` prefix for a regex search)."""
    __tracebackhide__ = True
    label = subject_label(on)
    if _warning_hits(record, pattern):
        return
    shown = [f"  {m.text.splitlines()[0][:200]}" for m in record.warnings[:10]]
    more = len(record.warnings) - len(shown)
    raise AssertionError(
        f"{label}: expected a builder warning matching {pattern!r}; "
        f"the build logged {len(record.warnings)} warning(s):\n"
        + ("\n".join(shown) or "  (none)") + (f"\n  ... and {more} more" if more > 0 else "")
        + "\nNext: check that the log was captured at WARNING level or lower, "
        "and the exact wording for this TensorRT version."
    )


@record_assertion
def assert_no_warning(record: BuildRecord, pattern: str, **on: Unpack[Subject]) -> None:
    """No builder WARNING contains ``pattern`` (substring; ``re:`` prefix for a regex search)."""
    __tracebackhide__ = True
    label = subject_label(on)
    hits = _warning_hits(record, pattern)
    if not hits:
        return
    shown = "\n".join(f"  {h.splitlines()[0][:200]}" for h in hits[:10])
    raise AssertionError(
        f"{label}: expected no builder warning matching {pattern!r}, found {len(hits)}:\n{shown}"
        + (f"\n  ... and {len(hits) - 10} more" if len(hits) > 10 else "")
        + "\nNext: fix the cause in the model or config, or drop the assertion if the warning is accepted."
    )


# calibration assertions live in their own module (which imports this one); re-exported on first use
# so that every record assertion is importable from here whichever of the two modules loads first
_CALIBRATION = dict.fromkeys(
    ("assert_calibration", "assert_calibration_coverage", "assert_dynamic_range", "assert_int8"),
    "pytest_trt.buildlog.calibration_assertions",
)


def __getattr__(name: str) -> Any:
    from pytest_trt import lazy_attribute

    return lazy_attribute(__name__, _CALIBRATION, name)
