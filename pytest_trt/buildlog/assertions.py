"""Assertions on a :class:`BuildRecord`: the one definition of each, registered with ``@record_assertion``.

Each function here is the record form (``pytest_trt.buildlog.assert_no_fusion(record, ...)``);
:mod:`pytest_trt.buildlog.registry` derives the ``Engine`` method and the module-level function
(``pytest_trt.assert_no_fusion(...)``, the current test's engine) from it.

Node names are matched by :func:`~pytest_trt.buildlog.matching.resolve_nodes` (exact, glob or
``re:`` regex).  Failures show the engine layers involved with their full origin lists, types,
tactics and dtypes, and say what to do next.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .events import event_groups, uses_events
from .matching import MAX_LAYERS_SHOWN, describe, layers_with, resolve_nodes
from .record import BuildRecord, Layer
from .record_diff import first_line
from .registry import Subject, record_assertion, subject_label

if TYPE_CHECKING:
    from typing_extensions import Unpack


def _groups_holding_all(record: BuildRecord, groups: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [g for g in event_groups(record) if all(set(want) & set(g) for want in groups)]


def _describe_groups(record: BuildRecord, found: Sequence[tuple[str, ...]]) -> str:
    text = "\n".join(f"  fused by the log's fusion events: {' + '.join(g)}" for g in found[:MAX_LAYERS_SHOWN])
    return (text or "  (none)") + f"\n  (the log has no layer listing; {len(record.fusion_events)} fusion events read)"


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
             else describe(layers_with(record, wanted)))
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
        count, shown = len(offenders), describe(offenders)
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
    layers = [layer for layer in layers_with(record, names) if layer.kind == "compute"]
    wrong = [layer for layer in layers if layer.precision != want]
    if layers and not wrong:
        return
    why = "no compute layer implements it" if not layers else f"{len(wrong)} of {len(layers)} layer(s) differ"
    raise AssertionError(
        f"{label}: expected {node!r} in {want}, but {why}:\n{describe(wrong or layers_with(record, names))}\n"
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
        f"Layers:\n{describe(record.layers)}\n"
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
    shown = [f"  {first_line(m.text)[:200]}" for m in record.warnings[:10]]
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
    shown = "\n".join(f"  {first_line(h)[:200]}" for h in hits[:10])
    raise AssertionError(
        f"{label}: expected no builder warning matching {pattern!r}, found {len(hits)}:\n{shown}"
        + (f"\n  ... and {len(hits) - 10} more" if len(hits) > 10 else "")
        + "\nNext: fix the cause in the model or config, or drop the assertion if the warning is accepted."
    )


def __getattr__(name: str) -> Any:
    # the calibration assertions live in their own module; every record assertion is importable from here
    if name.startswith("assert_"):
        import pytest_trt.buildlog.calibration_assertions as calibration

        return getattr(calibration, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
