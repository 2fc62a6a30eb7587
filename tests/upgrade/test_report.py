"""``pytest-trt upgrade-report`` on real bundle folders: TensorRT-RTX 1.4 vs 1.7 builds, ONNX Runtime runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from tests.upgrade.conftest import ROOT, RTX14_FIXTURE, copy_run

CORPUS = ROOT / "tests" / "data" / "trt_logs"
_LAYER = re.compile(r"^Name: (?P<name>[^,]+), LayerType: (?P<type>\w+)", re.M)
_VOID = {"meta", "br", "img", "hr", "input", "link"}
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def report_json(old: Path | str, new: Path | str, html: Path) -> tuple[int, dict]:
    run = cli("upgrade-report", old, new, "-o", html, "--json")
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def _corpus_layer_changes() -> tuple[set[str], set[str]]:
    """Engine layers only in the 1.4 / only in the 1.7 build of the example MobileNetV2, by a separate regex."""
    a = {f"{m['name']} [{m['type']}]" for m in _LAYER.finditer((CORPUS / "log_rtx1.4.0_mobilenet_v2_detailed.txt")
                                                                   .read_text())}
    b = {f"{m['name']} [{m['type']}]" for m in _LAYER.finditer((CORPUS / "log_rtx1.7.1_mobilenet_v2_detailed.txt")
                                                                   .read_text())}
    strip = re.compile(r"_myl\d+_\d+ ")
    keep = lambda s, other: {x for x in s if strip.sub(" ", x) not in {strip.sub(" ", y) for y in other}}  # noqa: E731
    return keep(a, b), keep(b, a)


class _Checker(HTMLParser):
    """Balanced tags (SVG's self-closed shapes included), and every URL an inline data: URI or a same-page anchor."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.pictures = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("src", "href") and value and not value.startswith(("data:", "#")):
                self.errors.append(f"external {key}={value!r}")
        if tag == "img":
            self.errors.append("an <img>: pictures are inline SVG")
        if tag == "svg":
            self.pictures += 1
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(f"unbalanced </{tag}>")


def check_html(path: Path) -> list[ET.Element]:
    """The report's pictures, each parsed by an XML parser (well-formed SVG), after the HTML checks."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"https?://|url\(", text), "the report must not load anything from outside the file"
    checker = _Checker()
    checker.feed(text)
    checker.close()
    assert checker.errors == [] and checker.stack == []
    svgs = [ET.fromstring(s) for s in _SVG.findall(text)]
    assert len(svgs) == checker.pictures
    return svgs


def shapes(svg: ET.Element) -> dict[str, int]:
    """A drawable picture: positive size, a title (the alt text), and how many of each shape it draws."""
    x, y, w, h = (float(v) for v in svg.get("viewBox", "").split())
    assert svg.tag == "svg" and x == y == 0 and w > 0 and h > 0
    assert svg.get("aria-label") and svg[0].tag == "title" and svg[0].text == svg.get("aria-label")
    counts: dict[str, int] = {}
    for e in svg.iter():
        counts[e.tag] = counts.get(e.tag, 0) + 1
    return counts


def test_rtx14_fixture_vs_installed_rtx_lists_real_layer_changes_and_build_failure(rtx_new: Path,
                                                                                    tmp_path: Path) -> None:
    code, doc = report_json(RTX14_FIXTURE, rtx_new, tmp_path / "r.html")
    assert code == 1  # the Q/DQ config could not be compared
    by = {c["config"]: c for c in doc["configs"]}
    qdq = by["mobilenet_v2_qdq"]
    assert qdq["verdict"] == "could not compare"
    assert qdq["reasons"][0].startswith("could not build on OLD (tensorrt-rtx 1.4.0.76, stage build): ")
    assert "MyelinCheckException" in qdq["reasons"][0]
    removed, added = _corpus_layer_changes()
    assert removed == {"classifier_myl0_18 [gemm]", "__myl_Add_myl0_19 [kgen]"} and added == {
        "__myl_FcAdd_myl0_18 [runtime_fusion]"}
    mnv2 = by["mobilenet_v2"]["structure"]
    assert {x.split(" <- ")[0] for x in mnv2["layers_removed"]} == removed
    assert {x.split(" <- ")[0] for x in mnv2["layers_added"]} == added
    assert mnv2["layer_count"] == [20, 19]
    assert by["mobilenet_v2"]["verdict"] == "changed (outputs not checked)"
    env = [(e["key"], e["old"], e["new"]) for e in by["mobilenet_v2"]["environment"]]
    # the toolchain change is the first environment line, for every config, the could-not-compare one included
    for config in by.values():
        first = config["environment"][0]
        assert (first["key"], first["old"]) == ("toolchain", "tensorrt-rtx 1.4.0.76")
        assert first["new"].startswith("tensorrt-rtx 1.") and first["new"] != first["old"]
        assert config["toolchain"] == {"old": first["old"], "new": first["new"], "changed": True}
    assert not any(k == "backend.version" for k, _, _ in env)  # folded into the toolchain line
    terminal = cli("upgrade-report", RTX14_FIXTURE, rtx_new, "--no-html").stdout.splitlines()
    for i, line in enumerate(terminal):
        if re.match(r"^[A-Z]", line) and " v1.0.0" in line and not line.startswith("ONLY"):
            assert terminal[i + 1] == f"    toolchain: tensorrt-rtx 1.4.0.76 -> {first['new']}", terminal
    images = check_html(tmp_path / "r.html")
    assert images, "the layer timeline of mobilenet_v2 is drawn"
    for svg in images:  # one box per engine layer, each titled with the ONNX nodes it implements
        assert shapes(svg)["rect"] >= 2 and svg.get("aria-label", "").endswith("layer timeline")
        assert {t.text for t in svg.iter("text")} >= {"OLD", "NEW", "classifier"}
    text = (tmp_path / "r.html").read_text()
    assert "could not build on OLD" in text and "__myl_FcAdd_myl0_18" in text


def test_live_rtx14_build_vs_installed(rtx14_live: Path, rtx_new: Path, tmp_path: Path) -> None:
    _, doc = report_json(rtx14_live, rtx_new, tmp_path / "r.html")
    by = {c["config"]: c for c in doc["configs"]}
    assert by["mobilenet_v2_qdq"]["reasons"][0].startswith("could not build on OLD (tensorrt-rtx 1.4.0.76")
    removed, added = _corpus_layer_changes()
    assert {x.split(" <- ")[0] for x in by["mobilenet_v2"]["structure"]["layers_removed"]} == removed


def test_identical_runs_are_unchanged_without_noise(rtx_new: Path, tmp_path: Path) -> None:
    twin = copy_run(rtx_new, tmp_path / "twin")  # other paths: noise that must stay out of the main view
    run = cli("upgrade-report", rtx_new, twin, "-o", tmp_path / "same.html")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    configs = [line for line in lines[1:] if not line.startswith(("report:", "approve with:"))][:-1]
    assert len(configs) == 4 and all(re.fullmatch(r"UNCHANGED\s+\S+ v1\.0\.0", c) for c in configs), lines
    assert lines[-3] == "4 unchanged; 0 unpaired"
    check_html(tmp_path / "same.html")
    html = (tmp_path / "same.html").read_text()
    assert "noise: 1 value(s)" in html and "<details>" in html  # the differing bundle folder, folded away
    assert html.count(str(twin)) == 1 and html.count(str(rtx_new)) == 1  # the OLD / NEW header only


def test_unpaired_bundles_are_listed(rtx_new: Path, tmp_path: Path) -> None:
    new = copy_run(rtx_new, tmp_path / "new")
    (new / "mobilenet_v2_b1-v1.0.0-rtx1.7-cpu-aot.tar.gz").unlink(missing_ok=True)
    for p in new.glob("mobilenet_v2_b1-*"):
        p.unlink()
    run = cli("upgrade-report", rtx_new, new, "--no-html")
    assert run.returncode == 1
    assert re.search(r"^ONLY IN OLD\s+mobilenet_v2_b1 v1\.0\.0 \(", run.stdout, re.M), run.stdout
    code, doc = report_json(rtx_new, new, tmp_path / "u.html")
    assert [s["config"] for s in doc["only_old"]] == ["mobilenet_v2_b1"] and doc["only_new"] == []
    html = (tmp_path / "u.html").read_text()
    assert "OLD only" in html
    # bundles named by file, relative to the folder given: the folders appear once each, in the OLD / NEW header
    assert "<td>mobilenet_v2_b1-v1.0.0-rtx1.7-cpu-aot.tar.gz</td>" in html, html
    assert html.count(str(new)) == 1 and html.count(str(rtx_new)) == 1


def test_onnxruntime_identical_runs_are_unchanged(ort_runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    old, new, _ = ort_runs
    code, doc = report_json(old, new, tmp_path / "same.html")
    assert code == 0 and {c["verdict"] for c in doc["configs"]} == {"unchanged"}
    labelled = {c["config"]: c for c in doc["configs"]}["mobilenet_v2_labelled_ort"]
    l2 = {(m["output"], m["tag"], m["metric"]): m for m in labelled["metrics"]}[("logits", None, "l2_delta")]
    assert l2["threshold"] == 0.05 and l2["old"] == l2["new"] == 0.0 and not l2["breached"]


def test_planted_regression_reports_metrics_and_pictures(ort_runs: tuple[Path, Path, Path], ort_planted: Path,
                                                         tmp_path: Path) -> None:
    old = ort_runs[0]
    code, doc = report_json(old, ort_planted, tmp_path / "reg.html")
    assert code == 1
    by = {c["config"]: c for c in doc["configs"]}
    reg = by["mobilenet_v2_labelled_ort"]
    assert reg["verdict"] == "regression"
    metrics = {(m["output"], m["tag"], m["metric"]): m for m in reg["metrics"]}
    l2 = metrics[("logits", None, "l2_delta")]
    assert l2["old"] == 0.0 and l2["new"] > 0.05 and l2["breached"]
    assert any(r.startswith("logits: l2_delta ") and "> threshold 0.05" in r for r in reg["reasons"])
    assert {k[1] for k in metrics} == {None, "dark", "typical"}
    assert [s["config"] for s in doc["only_old"]] == ["mobilenet_v2_qdq_ort"]  # the planted run has no QDQ check
    images = check_html(tmp_path / "reg.html")
    # histograms and confusion change of logits, per-tag bars: all drawn because the outputs moved
    by_alt = {svg.get("aria-label"): svg for svg in images}
    assert set(by_alt) == {"logits histograms", "logits confusion change", "mobilenet_v2_labelled_ort v1.0.0 per-tag bars"}
    hist = by_alt["logits histograms"]
    assert shapes(hist)["polygon"] == 6  # 3 statistics x (old, new)
    assert {"old", "new", "logits: max softmax confidence", "logits: entropy", "logits: top-2 margin"} <= {
        t.text for t in hist.iter("text")}
    bars = by_alt["mobilenet_v2_labelled_ort v1.0.0 per-tag bars"]
    tagged = [m for m in reg["metrics"] if m["tag"] and m["metric"] in ("accuracy", "agreement")]
    tips = sorted(t.text or "" for r in bars.iter("rect") for t in r.iter("title"))
    assert len(tips) == 2 * len(tagged) and any(t.endswith(f" new: {tagged[0]['text']['new']}") for t in tips)
    cells = [t.text or "" for r in by_alt["logits confusion change"].iter("rect") for t in r.iter("title")]
    assert cells and all(re.fullmatch(r"label \d+, predicted \d+: [+-]\d+", c) for c in cells)
    assert "identical in both runs" not in (tmp_path / "reg.html").read_text()


def test_unusable_runs_are_one_line_errors(tmp_path: Path) -> None:
    missing = cli("upgrade-report", tmp_path / "nope", RTX14_FIXTURE)
    assert missing.returncode == 3 and missing.stderr == f"pytest-trt: {tmp_path / 'nope'}: no such bundle or folder\n"
    (tmp_path / "empty").mkdir()
    empty = cli("upgrade-report", tmp_path / "empty", RTX14_FIXTURE)
    assert empty.returncode == 3 and "holds no bundles (*.tar.gz) and no build-failure notes" in empty.stderr
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.tar.gz").write_bytes(b"garbage")
    bad = cli("upgrade-report", tmp_path / "bad", RTX14_FIXTURE, "--no-html")
    # a file that is no bundle is listed with the reason (its name names no config), never a traceback
    assert bad.returncode == 1 and "Traceback" not in bad.stderr, bad.stderr
    assert re.search(r"^ONLY IN OLD\s+x\.tar\.gz v\? \(x\.tar\.gz\)\n    the bundle fails verification \(", bad.stdout,
                     re.M), bad.stdout


def test_pictures_are_drawn_without_a_plotting_library() -> None:
    """Every picture kind is hand-written SVG: drawing them imports no matplotlib, and the colour scale's ends and
    middle are ColorBrewer RdBu's (blue #053061, white #f7f7f7, red #67001f)."""
    code = (
        "import sys\n"
        "from pytest_trt.upgrade import pictures as p\n"
        "h = {'histograms': {'entropy': {'counts': [1, 3, 0], 'range': [0.0, 1.5]}}, 'classes': 3,"
        " 'confusion': [[0, 0, 2], [1, 2, 1]]}\n"
        "o = {'histograms': {'entropy': {'counts': [2, 1, 1], 'range': [0.0, 1.5]}}, 'confusion': [[0, 0, 1]]}\n"
        "svgs = [p.histograms('y', o, h), p.confusion_change('y', o, h)]\n"
        "assert all(s and s.startswith('<svg ') for s in svgs), svgs\n"
        "print(p.diverging(-1.0), p.diverging(0.0), p.diverging(1.0), 'matplotlib' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.stdout.split() == ["#053061", "#f7f7f7", "#67001f", "False"], run.stdout + run.stderr


def test_pictures_readable_on_a_wide_page(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    """In a 1400 px window (body margins 24 px each side), the smallest text of every picture renders at 12 px or
    more: a picture is as wide as the page up to its CSS max-width, so its scale is that width over its viewBox's."""
    html = tmp_path / "r.html"
    cli("upgrade-report", digits_incident["old"], digits_incident["new"], "-o", html)
    text = html.read_text()
    assert "svg.pic{display:block;width:100%;height:auto" in text
    pictures = check_html(html)
    assert {p.get("aria-label") for p in pictures} >= {"logits histograms", "logits confusion change"}
    for svg in pictures:
        assert svg.get("width") is None and svg.get("height") is None
        width = float(svg.get("viewBox", "").split()[2])
        cap = re.search(r"max-width:([\d.]+)px", svg.get("style") or "")
        scale = min(1400 - 2 * 24, float(cap.group(1)) if cap else 1e9) / width
        sizes = [float(e.get("font-size")) for e in svg.iter() if e.get("font-size")]
        assert min(sizes) * scale >= 12, (svg.get("aria-label"), min(sizes), scale)
    heat = next(p for p in pictures if p.get("aria-label") == "logits confusion change")
    labels = {t.text for t in heat.iter("text")}
    assert {str(i) for i in range(10)} <= labels  # every class of the ten labelled
