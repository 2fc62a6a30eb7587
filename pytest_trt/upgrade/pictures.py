"""The report's pictures, drawn with matplotlib (imported here only) and returned as inline PNG data URIs.

Each function returns ``None`` when there is nothing to draw, so the HTML
layer shows a picture only where it tells the reviewer something.
"""

from __future__ import annotations

import base64
import io
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_trt.buildlog.record import BuildRecord

OLD_COLOR, NEW_COLOR = "#4c72b0", "#dd8452"
_STAT_TITLES = {"max_confidence": "max softmax confidence", "entropy": "entropy", "top2_margin": "top-2 margin"}
MAX_TIMELINE_NODES = 80
#: unchanged nodes shown either side of a changed one in the timeline
CONTEXT = 3


def _figure(width: float, height: float, *, bottom: float = 0.18, left: float = 0.08) -> Any:
    """A bare Agg figure (no pyplot state), fixed margins: tight_layout would draw every figure twice."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=left, right=0.98, top=0.86, bottom=bottom, wspace=0.25)
    return fig


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=72, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def histograms(output: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Overlaid per-sample histograms (old vs new) of the three classifier statistics of one output."""
    hists_new = new.get("histograms") or {}
    hists_old = (old or {}).get("histograms") or {}
    stats = [s for s in _STAT_TITLES if s in hists_new]
    if not stats or all(hists_old.get(s) == hists_new[s] for s in stats):
        return None  # nothing to look at: the HTML says the distributions are identical
    fig = _figure(3.2 * len(stats), 2.4)
    axes = fig.subplots(1, len(stats))
    for ax, stat in zip(np.atleast_1d(axes), stats, strict=True):
        for label, h, color in (("old", hists_old.get(stat), OLD_COLOR), ("new", hists_new[stat], NEW_COLOR)):
            if not h:
                continue
            counts = np.asarray(h["counts"], dtype=float)
            edges = np.linspace(h["range"][0], h["range"][1], len(counts) + 1)
            ax.stairs(counts / max(counts.sum(), 1.0), edges, fill=True, alpha=0.45, color=color, label=label)
        ax.set_title(f"{output}: {_STAT_TITLES[stat]}", fontsize=8)
        # few ticks: tick layout is most of matplotlib's drawing time, and shares need no y scale
        lo, hi = hists_new[stat]["range"]
        ax.set_xticks([lo, (lo + hi) / 2, hi])
        ax.set_yticks([])
        ax.tick_params(labelsize=7)
    np.atleast_1d(axes)[0].legend(fontsize=7)
    return _png(fig)


def tag_bars(rows: Sequence[Any]) -> str | None:
    """Per-tag accuracy / agreement, old vs new, as grouped bars (rows: MetricRow with a tag)."""
    tagged = [r for r in rows if r.tag is not None and r.metric in ("accuracy", "agreement")]
    if not tagged or all(r.old == r.new for r in tagged):
        return None
    labels = [f"{r.output}[{r.tag}] {r.metric}" for r in tagged]
    x = np.arange(len(tagged))
    fig = _figure(max(3.5, 0.55 * len(tagged) + 1.5), 3.0, bottom=0.42)
    ax = fig.subplots()
    ax.bar(x - 0.2, [r.old or 0.0 for r in tagged], 0.4, color=OLD_COLOR, label="old")
    ax.bar(x + 0.2, [r.new or 0.0 for r in tagged], 0.4, color=NEW_COLOR, label="new")
    ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_yticks([0, 0.5, 1])
    ax.set_title("per-tag accuracy / agreement", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7)
    return _png(fig)


def _dense(sparse: Sequence[Sequence[int]] | None, classes: int) -> np.ndarray:
    m = np.zeros((classes, classes))
    for a, b, c in sparse or ():
        if 0 <= a < classes and 0 <= b < classes:
            m[a, b] += c
    return m


def confusion_change(output: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Heat map of new minus old confusion counts (rows: label, columns: predicted)."""
    classes = int(new.get("classes") or 0)
    if not classes or new.get("confusion") is None or not old or old.get("confusion") is None:
        return None
    delta = _dense(new["confusion"], classes) - _dense(old["confusion"], classes)
    if not delta.any():
        return None
    lim = max(float(np.abs(delta).max()), 1.0)
    fig = _figure(3.4, 3.0, bottom=0.14, left=0.14)
    ax = fig.subplots()
    im = ax.imshow(delta, cmap="RdBu_r", vmin=-lim, vmax=lim)
    step = max(1, classes // 5)
    ax.set_xticks(range(0, classes, step))
    ax.set_yticks(range(0, classes, step))
    ax.set_xlabel("predicted", fontsize=7)
    ax.set_ylabel("label", fontsize=7)
    ax.set_title(f"{output}: confusion change (new - old)", fontsize=8)
    ax.tick_params(labelsize=6)
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_ticks([-lim, 0, lim])
    bar.ax.tick_params(labelsize=6)
    return _png(fig)


def _groups(record: BuildRecord) -> list[tuple[str, ...]]:
    from pytest_trt.buildlog.events import event_groups, uses_events

    if uses_events(record):
        return [tuple(g) for g in event_groups(record)]
    return [tuple(dict.fromkeys(layer.origins)) for layer in record.layers if layer.kind == "compute"
            and layer.origins]


def timeline(old: BuildRecord, new: BuildRecord) -> str | None:
    """ONNX nodes left to right; per run, one bar per engine layer over the nodes it implements.

    Orange bars are layers whose node set exists only in that run: nodes merged
    (a longer bar) or split (shorter bars).  Grey bars are the same in both.
    """
    go, gn = _groups(old), _groups(new)
    # multisets: one ONNX node implemented by two layers in one run and one in the other is a merge
    so, sn = Counter(frozenset(g) for g in go), Counter(frozenset(g) for g in gn)
    if so == sn:
        return None
    order = list(dict.fromkeys(n for g in go + gn for n in g))
    changed = {n for g in ((so - sn) + (sn - so)) for n in g}
    # the changed nodes and a little context around them: the unchanged rest is one grey blur
    keep = {i for i, n in enumerate(order) if n in changed}
    keep |= {j for i in keep for j in range(i - CONTEXT, i + CONTEXT + 1) if 0 <= j < len(order)}
    order = [n for i, n in enumerate(order) if i in keep][:MAX_TIMELINE_NODES]
    pos = {n: i for i, n in enumerate(order)}
    longest = max((len(n) for n in order), default=1)
    height = 1.6 + 0.065 * min(longest, 40)
    width = max(6.0, 0.18 * len(order) + 1.5)
    fig = _figure(width, height, bottom=(0.065 * min(longest, 40) + 0.2) / height, left=0.6 / width)
    ax = fig.subplots()
    for row, groups, other in ((1, go, sn), (0, gn, so)):
        for g in groups:
            idx = sorted(pos[n] for n in g if n in pos)
            if not idx:
                continue
            same = other[frozenset(g)] == (so if other is sn else sn)[frozenset(g)]
            ax.barh(row, idx[-1] - idx[0] + 0.8, left=idx[0] - 0.4, height=0.6,
                    color="#bbbbbb" if same else "#e07b39", edgecolor="white")
    ax.set_yticks([0, 1], ["NEW", "OLD"], fontsize=8)
    ax.set_xticks(range(len(order)), [n[:40] for n in order], rotation=90, fontsize=6)
    ax.set_xlim(-0.6, len(order) - 0.4)
    ax.set_title("engine layers over ONNX nodes (orange: merged or split)", fontsize=8, loc="left")
    return _png(fig)


_DRAW: dict[str, Callable[..., str | None]] = {
    "histograms": histograms, "tag_bars": tag_bars, "confusion_change": confusion_change, "timeline": timeline,
}


def draw_all(jobs: Sequence[tuple[str, tuple[Any, ...]]]) -> list[str | None]:
    """Draw every ``(kind, args)`` job, in order.

    Serial on purpose: a process pool measured slower here (fork and pickling cost
    more than the ~0.07 s a picture takes on this 2-core machine).
    """
    return [_DRAW[kind](*args) for kind, args in jobs]
