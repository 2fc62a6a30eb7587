"""The report's pictures, written by hand as inline SVG (text: crisp in any browser, no plotting library).

Each function returns one ``<svg>`` element, or ``None`` when there is nothing to
draw, so the HTML layer shows a picture only where it tells the reviewer something.
The charts are simple (filled stairs, grouped bars, a heat map of cells, boxes on a
timeline), so writing their shapes directly costs well under a millisecond each,
where a plotting library took ~70 ms per picture.  No ``xmlns`` attribute: inline
SVG in HTML needs none, and the report must hold no URL at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from pytest_trt.buildlog.record import BuildRecord
from pytest_trt.upgrade import units

OLD_COLOR, NEW_COLOR = "#4c72b0", "#dd8452"
SAME_COLOR, CHANGED_COLOR = "#bbbbbb", "#e07b39"
_STAT_TITLES = {"max_confidence": "max softmax confidence", "entropy": "entropy", "top2_margin": "top-2 margin"}
MAX_TIMELINE_NODES = 80
#: the heat map labels every class up to this many classes (about ten labels beyond)
LABEL_EVERY_CLASS = 20
#: the timeline's text size: at 80 nodes it is about 1200 units wide, so a wide page barely enlarges it
_TIMELINE_FONT = 11.5
#: unchanged nodes shown either side of a changed one in the timeline
CONTEXT = 3
#: diverging blue-white-red scale (ColorBrewer RdBu reversed), negative to positive
_DIVERGING = ("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
              "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f")
_FRAME = 'fill="none" stroke="#444" stroke-width="0.8"'


def _n(v: float) -> str:
    """A coordinate, short: two decimals are sub-pixel."""
    return f"{v:.2f}".rstrip("0").rstrip(".")


def _tick(v: float) -> str:
    return f"{v:.3g}"


#: the most a picture is enlarged on a wide page (its CSS max-width is this times its viewBox width)
MAX_ZOOM = 2.0


def _svg(width: float, height: float, body: list[str]) -> str:
    """Sized by its viewBox only: CSS gives it the page's width, up to MAX_ZOOM times its own, so the text grows
    with the page (a 1400 px window renders a 700-unit-wide picture at twice its size)."""
    w, h = _n(width), _n(height)
    return (f'<svg class="pic" viewBox="0 0 {w} {h}" style="max-width:{_n(width * MAX_ZOOM)}px" '
            f'font-family="sans-serif" font-size="9" fill="#222">' + "".join(body) + "</svg>")


def _text(x: float, y: float, s: str, *, size: float = 9, anchor: str = "start", extra: str = "") -> str:
    a = "" if anchor == "start" else f' text-anchor="{anchor}"'
    f = "" if size == 9 else f' font-size="{_n(size)}"'
    return f'<text x="{_n(x)}" y="{_n(y)}"{a}{f}{extra}>{escape(s)}</text>'


def _rect(x: float, y: float, w: float, h: float, fill: str, extra: str = "", *, tip: str = "") -> str:
    """A filled rectangle; ``tip`` becomes its hover text (an SVG ``<title>``)."""
    head = f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="{fill}"{extra}'
    return f"{head}><title>{escape(tip)}</title></rect>" if tip else head + "/>"


@dataclass(frozen=True)
class _Scale:
    """Data to picture coordinates: ``start + (v - lo) / span * length`` (a negative length points up)."""

    lo: float
    span: float
    start: float
    length: float

    def __call__(self, v: float) -> float:
        return self.start + (v - self.lo) / self.span * self.length


def _legend(x: float, y: float) -> str:
    """Old and new swatches in a 40 px box whose right edge is ``x`` (placed right of the plots: hides nothing)."""
    parts = [f'<rect x="{_n(x - 44)}" y="{_n(y)}" width="40" height="28" fill="#fff" fill-opacity="0.8" '
             f'stroke="#ccc" stroke-width="0.6"/>']
    for i, (label, color) in enumerate((("old", OLD_COLOR), ("new", NEW_COLOR))):
        parts.append(_rect(x - 40, y + 4 + 12 * i, 12, 8, color, ' fill-opacity="0.7"'))
        parts.append(_text(x - 24, y + 11 + 12 * i, label, size=8))
    return "".join(parts)


def histograms(output: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Overlaid per-sample histograms (old vs new, share of samples per bin) of the classifier statistics."""
    hists_new = new.get("histograms") or {}
    hists_old = (old or {}).get("histograms") or {}
    stats = [s for s in _STAT_TITLES if s in hists_new]
    if not stats or all(hists_old.get(s) == hists_new[s] for s in stats):
        return None  # nothing to look at: the HTML says the distributions are identical
    pw, ph, top, left, gap = 200.0, 120.0, 22.0, 10.0, 24.0
    body: list[str] = []
    for k, stat in enumerate(stats):
        x0 = left + k * (pw + gap)
        series = [(h, color) for h, color in ((hists_old.get(stat), OLD_COLOR), (hists_new[stat], NEW_COLOR)) if h]
        lo = min(float(h["range"][0]) for h, _ in series)
        hi = max(float(h["range"][1]) for h, _ in series)
        span = (hi - lo) or 1.0
        shares = []
        for h, _ in series:
            total = max(float(sum(h["counts"])), 1.0)
            shares.append([c / total for c in h["counts"]])
        ymax = max((max(s, default=0.0) for s in shares), default=0.0) * 1.05 or 1.0
        sx, sy = _Scale(lo, span, x0, pw), _Scale(0.0, ymax, top + ph, -ph)
        body.append(_text(x0 + pw / 2, top - 8, f"{output}: {_STAT_TITLES[stat]}", size=10, anchor="middle"))
        for (h, color), share in zip(series, shares, strict=True):
            a, b = float(h["range"][0]), float(h["range"][1])
            edges = [a + (b - a) * i / len(share) for i in range(len(share) + 1)]
            pts = [f"{_n(sx(edges[0]))},{_n(sy(0))}"]
            for i, s in enumerate(share):
                pts.append(f"{_n(sx(edges[i]))},{_n(sy(s))} {_n(sx(edges[i + 1]))},{_n(sy(s))}")
            pts.append(f"{_n(sx(edges[-1]))},{_n(sy(0))}")
            body.append(f'<polygon points="{" ".join(pts)}" fill="{color}" fill-opacity="0.45" stroke="{color}" '
                        f'stroke-width="0.8"/>')
        body.append(f'<rect x="{_n(x0)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}" {_FRAME}/>')
        nlo, nhi = (float(v) for v in hists_new[stat]["range"])
        for v in (nlo, (nlo + nhi) / 2, nhi):
            x = sx(v)
            body.append(f'<line x1="{_n(x)}" y1="{_n(top + ph)}" x2="{_n(x)}" y2="{_n(top + ph + 3)}" stroke="#444"/>')
            body.append(_text(x, top + ph + 13, _tick(v), size=8, anchor="middle"))
    right = left + len(stats) * (pw + gap) - gap
    body.append(_legend(right + 48, top))
    return _svg(right + 52, top + ph + 20, body)


def tag_bars(rows: Sequence[Any]) -> str | None:
    """Per-tag accuracy / agreement, old vs new, as grouped bars (rows: MetricRow with a tag)."""
    tagged = [r for r in rows if r.tag is not None and r.metric in ("accuracy", "agreement")]
    if not tagged or all(r.old == r.new for r in tagged):
        return None
    labels = [f"{r.output}[{r.tag}] {r.metric}" for r in tagged]
    slot, top, ph = 40.0, 22.0, 120.0
    pw = max(180.0, slot * len(tagged))
    longest = max(len(s) for s in labels)
    # labels at 30 degrees, anchored at their end under the bar: the first reaches left of the axis
    left = max(34.0, 3.9 * min(len(labels[0]), 48) - (pw - slot * len(tagged)) / 2 - slot / 2 + 4)
    bottom = 14 + 0.5 * 4.6 * min(longest, 48)  # labels at 30 degrees: about half their length hangs down
    sy = _Scale(0.0, 1.05, top + ph, -ph)
    body = [_text(left + pw / 2, top - 8, "per-tag accuracy / agreement", size=10, anchor="middle")]
    for v in (0.0, 0.5, 1.0):
        body.append(f'<line x1="{_n(left - 3)}" y1="{_n(sy(v))}" x2="{_n(left)}" y2="{_n(sy(v))}" stroke="#444"/>')
        body.append(_text(left - 5, sy(v) + 3, _tick(v), size=8, anchor="end"))
    x_first = left + (pw - slot * len(tagged)) / 2
    for i, (r, label) in enumerate(zip(tagged, labels, strict=True)):
        cx = x_first + slot * (i + 0.5)
        for dx, value, color in ((-0.4, r.old, OLD_COLOR), (0.0, r.new, NEW_COLOR)):
            v = max(0.0, min(float(value or 0.0), 1.05))
            tip = f'{label} {"old" if color == OLD_COLOR else "new"}: {units.text(r.metric, value)}'
            body.append(_rect(cx + dx * slot, sy(v), 0.4 * slot, top + ph - sy(v), color, tip=tip))
        body.append(f'<line x1="{_n(cx)}" y1="{_n(top + ph)}" x2="{_n(cx)}" y2="{_n(top + ph + 3)}" stroke="#444"/>')
        body.append(_text(cx, top + ph + 11, label[:48], size=8, anchor="end",
                          extra=f' transform="rotate(-30 {_n(cx)} {_n(top + ph + 11)})"'))
    body.append(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}" {_FRAME}/>')
    body.append(_legend(left + pw + 48, top))
    return _svg(left + pw + 52, top + ph + bottom, body)


def _hex(c: str) -> tuple[int, int, int]:
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)


def diverging(t: float) -> str:
    """Colour of ``t`` in [-1, 1] on the blue (negative) - white (0) - red (positive) scale."""
    u = (max(-1.0, min(1.0, t)) + 1) / 2 * (len(_DIVERGING) - 1)
    i = min(int(u), len(_DIVERGING) - 2)
    f = u - i
    a, b = _hex(_DIVERGING[i]), _hex(_DIVERGING[i + 1])
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b, strict=True))


def _delta(old: Sequence[Sequence[int]], new: Sequence[Sequence[int]], classes: int) -> dict[tuple[int, int], int]:
    d: dict[tuple[int, int], int] = {}
    for sign, sparse in ((-1, old), (1, new)):
        for a, b, c in sparse:
            if 0 <= a < classes and 0 <= b < classes:
                d[(a, b)] = d.get((a, b), 0) + sign * int(c)
    return {k: v for k, v in d.items() if v}


def confusion_change(output: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Heat map of new minus old confusion counts (rows: label, columns: predicted), with a colour bar."""
    classes = int(new.get("classes") or 0)
    if not classes or new.get("confusion") is None or not old or old.get("confusion") is None:
        return None
    delta = _delta(old["confusion"], new["confusion"], classes)
    if not delta:
        return None
    lim = max(max(abs(v) for v in delta.values()), 1)
    size, top, left = 240.0, 22.0, 40.0
    cell = size / classes
    body = [_text(left + size / 2 + 20, top - 8, f"{output}: confusion change (new - old)", size=10,
                  anchor="middle"),
            _rect(left, top, size, size, _DIVERGING[5], ' shape-rendering="crispEdges"')]
    for (a, b), v in sorted(delta.items()):
        body.append(_rect(left + b * cell, top + a * cell, cell, cell, diverging(v / lim),
                          ' shape-rendering="crispEdges"', tip=f"label {a}, predicted {b}: {v:+d}"))
    body.append(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(size)}" height="{_n(size)}" {_FRAME}/>')
    step = 1 if classes <= LABEL_EVERY_CLASS else -(-classes // 10)
    for i in range(0, classes, step):
        c = (i + 0.5) * cell
        body.append(_text(left + c, top + size + 11, str(i), size=8, anchor="middle"))
        body.append(_text(left - 3, top + c + 3, str(i), size=8, anchor="end"))
    body.append(_text(left + size / 2, top + size + 22, "predicted", size=8, anchor="middle"))
    body.append(_text(12, top + size / 2, "label", size=8, anchor="middle",
                      extra=f' transform="rotate(-90 12 {_n(top + size / 2)})"'))
    # colour bar: 40 slices from +lim (top) to -lim (bottom)
    bx, bw, slices = left + size + 14, 10.0, 40
    for j in range(slices):
        body.append(_rect(bx, top + j * size / slices, bw, size / slices + 0.3, diverging(1 - 2 * (j + 0.5) / slices),
                          ' shape-rendering="crispEdges"'))
    body.append(f'<rect x="{_n(bx)}" y="{_n(top)}" width="{_n(bw)}" height="{_n(size)}" {_FRAME}/>')
    for v, y in ((lim, top), (0, top + size / 2), (-lim, top + size)):
        body.append(_text(bx + bw + 3, y + 3, f"{v:d}", size=8))
    return _svg(bx + bw + 30, top + size + 28, body)


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
    col, row_h, top, left = 14.0, 22.0, 20.0, 40.0
    labels = [n[:40] for n in order]
    f = _TIMELINE_FONT
    label_h = 8 + 0.55 * f * max((len(s) for s in labels), default=1)
    col = max(col, f + 3)
    width = max(left + col * len(order) + 10, 360.0)
    body = [_text(4, top - 8, "engine layers over ONNX nodes (orange: merged or split)", size=f + 1)]
    for row, (name, groups, mine, other) in enumerate((("OLD", go, so, sn), ("NEW", gn, sn, so))):
        y = top + row * (row_h + 6)
        body.append(_text(left - 6, y + row_h / 2 + 3, name, size=f, anchor="end"))
        for g in groups:
            idx = sorted(pos[n] for n in g if n in pos)
            if not idx:
                continue
            key = frozenset(g)
            color = SAME_COLOR if mine[key] == other[key] else CHANGED_COLOR
            body.append(_rect(left + col * (idx[0] + 0.1), y, col * (idx[-1] - idx[0] + 0.8), row_h, color,
                              ' stroke="#fff"', tip=" + ".join(g)))
    axis = top + 2 * row_h + 6
    for i, label in enumerate(labels):
        x = left + col * (i + 0.5)
        body.append(f'<line x1="{_n(x)}" y1="{_n(axis)}" x2="{_n(x)}" y2="{_n(axis + 3)}" stroke="#444"/>')
        body.append(_text(x + 3, axis + 6, label, size=f, anchor="end",
                          extra=f' transform="rotate(-90 {_n(x + 3)} {_n(axis + 6)})"'))
    return _svg(width, axis + label_h, body)


_DRAW: dict[str, Callable[..., str | None]] = {
    "histograms": histograms, "tag_bars": tag_bars, "confusion_change": confusion_change, "timeline": timeline,
}


def draw_all(jobs: Sequence[tuple[str, tuple[Any, ...]]]) -> list[str | None]:
    """Draw every ``(kind, args)`` job, in order: each an ``<svg>`` element or ``None``."""
    return [_DRAW[kind](*args) for kind, args in jobs]
