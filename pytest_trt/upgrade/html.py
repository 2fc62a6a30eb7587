"""One self-contained HTML file: inline CSS and inline SVG pictures, no external URL of any kind."""

from __future__ import annotations

from html import escape
from typing import Any

from pytest_trt.buildlog.record_diff import first_line
from pytest_trt.upgrade import pictures, units
from pytest_trt.upgrade.model import (
    CHANGED_UNCHECKED,
    NOT_COMPARED,
    REGRESSION,
    UNCHANGED,
    ConfigReview,
    UpgradeReport,
)
from pytest_trt.upgrade.pairing import VERIFY_STAGE
from pytest_trt.upgrade.pin import amax

_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:min(96vw,1800px)}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}h3{font-size:1em}
table{border-collapse:collapse;margin:.4em 0;font-size:.85em}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}
th{background:#f3f3f3}.v{font-weight:bold;padding:2px 8px;border-radius:4px;white-space:nowrap}
.regression{background:#f8d0d0}.could-not-compare{background:#f8e3c0}.changed{background:#fff3b0}
.unchanged{background:#d5f0d5}.breach{color:#b00;font-weight:bold}
svg.pic{display:block;width:100%;height:auto;margin:.3em 0}
pre.cmd{background:#f6f6f6;padding:.4em;white-space:pre-wrap}
details{margin:.5em 0}summary{cursor:pointer;color:#555}code{font-size:.9em}
"""


def _cls(verdict: str) -> str:
    if verdict == REGRESSION:
        return "regression"
    if verdict == NOT_COMPARED:
        return "could-not-compare"
    return "unchanged" if verdict == UNCHANGED else "changed"


def _fmt(value: Any) -> str:
    """Floats rounded for display only; the JSON keeps full precision."""
    if isinstance(value, float):
        return "0" if value == 0 else f"{value:.4g}"
    return "-" if value is None else escape(str(value))


def _unusable(side: Any) -> str:
    """Why an unpaired bundle could not be used, when it could not."""
    note = side.failure or {}
    return f"<br>{escape(str(note.get('message')))}" if note.get("stage") == VERIFY_STAGE else ""


def _table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def _list(title: str, items: list[str], limit: int = 30) -> str:
    if not items:
        return ""
    shown = "".join(f"<li><code>{escape(i)}</code></li>" for i in items[:limit])
    more = f"<li>... {len(items) - limit} more (see --json)</li>" if len(items) > limit else ""
    return f"<h3>{escape(title)} ({len(items)})</h3><ul>{shown}{more}</ul>"


class _Pictures:
    """Pictures to draw, collected while the HTML is assembled, then drawn together."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, tuple[Any, ...]]] = []
        self.alts: list[str] = []

    def __call__(self, kind: str, *args: Any, alt: str) -> str:
        self.jobs.append((kind, args))
        self.alts.append(alt)
        return f"<!--picture {len(self.jobs) - 1}-->"

    def fill(self, text: str) -> str:
        for i, svg in enumerate(pictures.draw_all(self.jobs)):
            # the alt text becomes the picture's accessible name and its first child, the SVG <title>
            pic = svg.replace(">", f' role="img" aria-label="{escape(self.alts[i])}"><title>'
                              f"{escape(self.alts[i])}</title>", 1) if svg else ""
            text = text.replace(f"<!--picture {i}-->", pic, 1)
        return text


def _build_seconds(r: ConfigReview) -> tuple[float, float] | None:
    """Builder seconds of both runs (shown with a changed structure; per-run jitter otherwise, so noise)."""
    if r.old is None or r.new is None or r.old.bundle is None or r.new.bundle is None:
        return None
    a = r.old.bundle.build["build"].get("durations", {}).get("build")
    b = r.new.bundle.build["build"].get("durations", {}).get("build")
    return (float(a), float(b)) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None


def _structure(r: ConfigReview, tactics: bool, pics: _Pictures) -> str:
    d = r.structure
    if d is None or d.is_empty:
        return "<p>structure: no change</p>" if d is not None else ""
    parts = ["<h3>structure</h3>"]
    facts = []
    if d.versions:
        facts.append(f"backend version {_fmt(d.versions[0])} &rarr; {_fmt(d.versions[1])}")
    if d.layer_count:
        facts.append(f"engine layers {d.layer_count[0]} &rarr; {d.layer_count[1]}")
    if d.reformat_count:
        facts.append(f"reformat layers {d.reformat_count[0]} &rarr; {d.reformat_count[1]}")
    if d.masked_tactic_changes:
        facts.append(f"{d.masked_tactic_changes} tactic change(s) (masked)")
    seconds = _build_seconds(r)
    if seconds:
        facts.append(f"build {seconds[0]:.2f} s &rarr; {seconds[1]:.2f} s")
    if facts:
        parts.append("<p>" + "; ".join(facts) + "</p>")
    parts.append(_list("fusions gained", [" + ".join(s) for s in d.fusions_gained]))
    parts.append(_list("fusions lost", [" + ".join(s) for s in d.fusions_lost]))
    if d.precision_changes:
        parts.append("<h3>precision changes per node</h3>" + _table(
            ["ONNX node", "old", "new"], [[escape(n), _fmt(a), _fmt(b)] for n, a, b in d.precision_changes[:60]]))
    if d.replaced_nodes:
        parts.append("<h3>replaced nodes (same output tensor)</h3>" + _table(
            ["old node", "new node", "old precision", "new precision"],
            [[escape(a), escape(b), _fmt(pa), _fmt(pb)] for a, b, pa, pb in d.replaced_nodes[:60]]))
    parts.append(_list("layers added", list(d.layers_added)))
    parts.append(_list("layers removed", list(d.layers_removed)))
    if tactics:
        parts.append(_list("tactic changes", [f"{n}: {a} -> {b}" for n, a, b in d.tactic_changes]))
    if d.memory:
        parts.append("<h3>memory</h3>" + _table(["field", "old", "new"],
                                                 [[escape(k), _fmt(a), _fmt(b)] for k, (a, b) in d.memory.items()]))
    parts.append(_list("new warnings", [first_line(w)[:200] for w in d.new_warnings]))
    if r.old and r.new and r.old.bundle and r.new.bundle:
        ra, rb = r.old.bundle.record(), r.new.bundle.record()
        if ra is not None and rb is not None:
            parts.append(pics("timeline", ra, rb, alt=f"{r.title} layer timeline"))
    return "".join(parts)


def _outputs(r: ConfigReview, pics: _Pictures) -> str:
    if not r.metrics:
        return ""
    rows = []
    for m in r.metrics:
        cls = ' class="breach"' if m.breached else ""
        bound = "" if m.threshold is None else f"{units.within_op(m.metric, m.bound)} {escape(m.text('threshold'))}"
        rel = " vs golden" if m.metric in RELATIVE else ""
        rows.append([escape(m.test.rsplit("::", 1)[-1]), escape(m.output), escape(m.tag or ""),
                     escape(m.metric + rel), escape(m.text("old")), f"<span{cls}>{escape(m.text('new'))}</span>",
                     escape(m.text("golden")) if m.golden is not None else "", bound])
    parts = ["<h3>outputs (golden metrics: OLD, NEW and the golden's own figure)</h3>",
             _table(["test", "output", "tag", "metric", "old", "new", "golden", "threshold"], rows)]
    for test, outputs in r.outputs_new.items():
        for name, summary in sorted(outputs.items()):
            old = r.outputs_old.get(test, {}).get(name)
            hists = summary.get("histograms") or {}
            if hists and all(((old or {}).get("histograms") or {}).get(k) == v for k, v in hists.items()):
                parts.append(f"<p>{escape(name)}: per-sample confidence, entropy and top-2 margin histograms "
                             "are identical in both runs</p>")
            parts.append(pics("histograms", name, old, summary, alt=f"{name} histograms"))
            parts.append(pics("confusion_change", name, old, summary, alt=f"{name} confusion change"))
    parts.append(pics("tag_bars", list(r.metrics), alt=f"{r.title} per-tag bars"))
    return "".join(parts)


#: metrics of NEW's outputs against the golden's (not absolute figures of one run)
RELATIVE = ("l2_delta", "max_abs", "max_rel", "cosine", "top1_agreement", "agreement")


def _localization(r: ConfigReview) -> str:
    loc = r.localization
    if not loc:
        return ""
    if not loc.get("node"):
        why = loc.get("reason") or loc.get("note") or "no diverging node found"
        return f"<h3>where it went wrong</h3><p>not localized (could not bisect): {escape(str(why))}</p>"
    rows = [[escape(str(s["node"])), _fmt(s["error"])] for s in loc.get("path", [])]
    replaced = (f" It replaces OLD's <code>{escape(str(loc['replaces']))}</code> (same output tensor)."
                if loc.get("replaces") else "")
    qdq = f" {escape(str(loc['qdq']))}." if loc.get("qdq") else ""
    return (f"<h3>where it went wrong</h3><p>first diverging ONNX node: <code>{escape(loc['node'])}</code> "
            f"(fusion group: <code>{escape(' + '.join(loc.get('group') or []))}</code>), "
            f"{escape(str(loc.get('compared')))}, {loc.get('steps')} bisection steps.{replaced}{qdq} "
            f"{escape(str(loc.get('note') or ''))}</p>" + _table(["node on the path", "error"], rows))


def _pin(r: ConfigReview) -> str:
    """What changed in the pin: first in a config's section, before its structure."""
    p = r.pin
    if p is None:
        return ""
    if not p.changed:
        return (f"<h3>what changed in the pin</h3><p>nothing: config hash <code>{escape(str(p.config_hash[0]))}"
                "</code></p>")
    parts = ["<h3>what changed in the pin</h3>",
             f"<p>config hash <code>{escape(str(p.config_hash[0]))}</code> &rarr; "
             f"<code>{escape(str(p.config_hash[1]))}</code></p>"]
    if p.fields:
        parts.append(_table(["BuildConfig field", "old", "new"],
                            [[escape(k), _fmt(a), _fmt(b)] for k, a, b in p.fields]))
    if p.ranges or p.ranges_added or p.ranges_removed:
        total = len(p.ranges) + p.ranges_unchanged + len(p.ranges_added) + len(p.ranges_removed)
        parts.append(f"<p>{len(p.ranges)} of {total} INT8 ranges moved (largest move of amax first); "
                     f"{p.ranges_unchanged} unchanged</p>" + _table(
                         ["tensor", "old range", "new range", "old amax", "new amax", "new / old"],
                         [[escape(c.tensor), f"[{c.old[0]:.4g}, {c.old[1]:.4g}]", f"[{c.new[0]:.4g}, {c.new[1]:.4g}]",
                           _fmt(amax(c.old)), _fmt(amax(c.new)), f"&times;{c.ratio:.3g}"] for c in p.ranges[:40]]))
        parts.append(_list("ranges added", list(p.ranges_added)))
        parts.append(_list("ranges removed", list(p.ranges_removed)))
    return "".join(parts)


def _quant_errors(r: ConfigReview) -> str:
    qe = r.quant_errors
    if not qe:
        return ""
    if not qe.get("computed"):
        return f"<h3>quantization errors</h3><p>not computed: {escape(str(qe.get('reason')))}</p>"
    rows = [[escape(t["tensor"]), escape(t["kind"]), _fmt(t["old_db"]), _fmt(t["new_db"]), f"{t['clipped']:.2%}"]
            for t in qe["tensors"]]
    nodes = "".join(f"<li><code>{escape(n['node'])}</code> {_fmt(n['sqnr_db'])} dB</li>" for n in qe["nodes"])
    return (f"<h3>quantization errors ({qe['samples']} golden samples, own SQNR, worst first)</h3>"
            + _table(["tensor", "kind", "OLD dB", "NEW dB", "clipped (NEW)"], rows)
            + f"<p>nodes to leave in float first:</p><ul>{nodes}</ul>"
            + f"<pre class=\"cmd\">{escape(qe['search'])}</pre>")


def _approve(r: ConfigReview, report: UpgradeReport, html_name: str) -> str:
    if r.approve is None or (r.verdict == CHANGED_UNCHECKED and not report.allow_unchecked):
        return ""
    cmd = f"{r.approve} --trt-approve-report {html_name}"
    return f"<h3>approve</h3><p>after review, approve NEW's outputs with:</p><pre class=\"cmd\">{escape(cmd)}</pre>"


def _config(r: ConfigReview, tactics: bool, pics: _Pictures, report: UpgradeReport, html_name: str) -> str:
    head = (f'<h2 id="{escape(r.name)}">{escape(r.title)} <span class="v {_cls(r.verdict)}">'
            f"{escape(r.verdict)}</span></h2>")
    reasons = "".join(f"<li>{escape(x)}</li>" for x in r.reasons)
    parts = [head, f"<ul>{reasons}</ul>" if reasons else ""]
    if r.old is not None and r.new is not None and r.old.bundle is not None and r.new.bundle is not None:
        parts += [_pin(r), _structure(r, tactics, pics), _outputs(r, pics), _localization(r), _quant_errors(r)]
        if r.environment:
            main = [e for e in r.environment if not e[0].startswith("package ")]
            packages = [e for e in r.environment if e[0].startswith("package ")]
            parts.append("<h3>environment</h3>" + _table(["what", "old", "new"], [
                [escape(k), _fmt(a), _fmt(b)] for k, a, b in main]))
            if packages:
                parts.append(f"<details><summary>{len(packages)} installed package(s) differ</summary>"
                             + _table(["package", "old", "new"], [[escape(k[8:]), _fmt(a), _fmt(b)]
                                                                  for k, a, b in packages]) + "</details>")
        if r.noise:
            parts.append(f"<details><summary>noise: {len(r.noise)} value(s) that differ on every run</summary>"
                         + _table(["what", "old", "new"], [[escape(k), _fmt(a), _fmt(b)] for k, a, b in r.noise])
                         + "</details>")
        parts.append(_approve(r, report, html_name))
    elif r.environment:
        parts.append("<h3>environment</h3>" + _table(["what", "old", "new"], [
            [escape(k), _fmt(a), _fmt(b)] for k, a, b in r.environment]))
    return "".join(parts)


def render_html(report: UpgradeReport, *, tactics: bool = False, html_name: str = "upgrade-report.html") -> str:
    pics = _Pictures()
    counts = ", ".join(f"{n} {v}" for v, n in report.counts.items() if n)
    rows = [[f'<a href="#{escape(r.name)}">{escape(r.title)}</a>', f'<span class="v {_cls(r.verdict)}">'
             f"{escape(r.verdict)}</span>", escape(r.reasons[0] if r.reasons else "")] for r in report.reviews]
    unpaired = [[escape(s.name), escape(s.version), where, escape(s.file) + _unusable(s)]
                for where, sides in (("OLD only", report.only_old), ("NEW only", report.only_new)) for s in sides]
    body = [
        "<h1>Upgrade review</h1>",
        f"<p>OLD: <code>{escape(report.old_label)}</code><br>NEW: <code>{escape(report.new_label)}</code></p>",
        f"<p><b>{escape(counts or 'no paired configs')}</b>; {len(unpaired)} unpaired</p>",
        _table(["config", "verdict", "first reason"], rows),
        ("<h2>unpaired bundles</h2>" + _table(["config", "version", "where", "file (in OLD / NEW)"], unpaired))
        if unpaired else "",
        *(_config(r, tactics, pics, report, html_name) for r in report.reviews),
    ]
    return pics.fill("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pytest-trt upgrade "
                     f"review</title><style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")
