"""The upgrade review of the calibration incident (entropy approved, min-max deployed), from real runs.

Expected figures are read here from the bundles' own build.json / golden.json tables with tarfile and
worked out from the definitions in docs/upgrade.md (amax = max(|lo|, |hi|), ranges ordered by
|log(new amax / old amax)|; a top-1 drop shown as the check shows it, -8.0% against -2.0%), never
by calling the review's code.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from tests.upgrade.conftest import bundle_doc
from tests.upgrade.test_report import cli

TEST = "examples/calibration/test_incident.py::test_accuracy_has_not_dropped"
FAILS_FIRST = "examples/calibration/test_incident.py::test_calibration_is_the_approved_algorithm"


def _ranges(folder: Path) -> dict[str, list[float]]:
    return bundle_doc(folder, "build.json")["build"]["extra"]["calibration"]["ranges"]


def _review(digits: dict[str, Path], tmp_path: Path, *extra: str, new: str = "new") -> tuple[int, dict, str]:
    html = tmp_path / "r.html"
    run = cli("upgrade-report", digits["old"], digits[new], "-o", html, "--json", *extra)
    assert run.returncode in (0, 1), run.stderr
    (config,) = json.loads(run.stdout)["configs"]
    return run.returncode, config, html.read_text()


def test_the_pin_block_names_the_calibration_switch_and_the_largest_range_move(digits_incident: dict[str, Path],
                                                                               tmp_path: Path) -> None:
    code, config, html = _review(digits_incident, tmp_path)
    assert code == 1 and config["verdict"] == "regression"
    pin = config["pin"]
    old_conf = bundle_doc(digits_incident["old"], "config.json")
    new_conf = bundle_doc(digits_incident["new"], "config.json")
    assert pin["config_hash"] == {"old": old_conf["config_hash"], "new": new_conf["config_hash"]}
    fields = {f["field"]: (f["old"], f["new"]) for f in pin["fields"]}
    assert fields["calibration.algorithm"] == ("entropy", "minmax")
    assert not any(k in ("onnx", "calibration.data") for k in fields)  # paths are shown by their digests
    ra, rb = _ranges(digits_incident["old"]), _ranges(digits_incident["new"])

    def amax(r: list[float]) -> float:
        return max(abs(r[0]), abs(r[1]))

    moved = {t: abs(math.log(amax(rb[t]) / amax(ra[t]))) if amax(ra[t]) and amax(rb[t]) else math.inf
             for t in ra.keys() & rb.keys() if ra[t] != rb[t]}
    order = sorted(moved, key=lambda t: (-moved[t], t))
    assert [r["tensor"] for r in pin["ranges"]] == order
    assert pin["ranges_unchanged"] == sum(1 for t in ra.keys() & rb.keys() if ra[t] == rb[t])
    assert pin["ranges"][0]["old"] == ra[order[0]] and pin["ranges"][0]["new"] == rb[order[0]]
    # HTML: the pin block first in the config's section, before the structure
    section = html[html.index('<h2 id="digits_mnet"'):]
    assert section.index("what changed in the pin") < section.index("structure")
    assert f"<td>{order[0]}</td>" in section
    terminal = cli("upgrade-report", digits_incident["old"], digits_incident["new"], "--no-html").stdout.splitlines()
    verdict = next(i for i, line in enumerate(terminal) if line.startswith("REGRESSION"))
    assert terminal[verdict + 1].startswith("    pin: config hash ")
    assert "calibration.algorithm entropy -> minmax" in terminal[verdict + 1]
    assert f"largest {order[0]} amax" in terminal[verdict + 1]


def test_one_unit_per_metric(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    _, config, html = _review(digits_incident, tmp_path)
    raw = bundle_doc(digits_incident["new"], "golden.json")["checks"][TEST]["outputs"]["outputs"]["logits"]
    drop_pct = raw["metrics"]["accuracy_drop"] * 100  # obtained minus golden: negative for a drop
    shown = f"{drop_pct:+.1f}%"
    assert shown == "-8.0%"
    row = next(m for m in config["metrics"] if m["metric"] == "top1_drop" and m["tag"] is None)
    assert row["unit"] == "%" and abs(row["new"] - drop_pct) < 1e-9 and row["threshold"] == -2.0
    assert row["text"]["new"] == shown and row["text"]["threshold"] == "-2.0%" and row["breached"]
    assert f"logits: top1_drop {shown} < threshold -2.0% ({TEST})" in config["reasons"]
    terminal = cli("upgrade-report", digits_incident["old"], digits_incident["new"], "--no-html").stdout
    assert f"top1_drop {shown} < threshold -2.0%" in terminal
    assert re.search(r"top1_drop</td><td>[^<]*</td><td><span class=\"breach\">-8\.0%</span></td><td>[^<]*</td>"
                     r"<td>&ge; -2\.0%</td>", html), html[html.index("top1_drop"):][:300]
    for text in (terminal, html):
        assert f"{-drop_pct / 100:.4g}" not in text  # never the raw fraction (0.0804)
    drift = next(m for m in config["metrics"] if m["metric"] == "drift_sd:entropy")
    assert drift["unit"] == "SD" and drift["text"]["threshold"] == "3 SD"


def test_old_absolute_means(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    _, config, html = _review(digits_incident, tmp_path)
    old = bundle_doc(digits_incident["old"], "golden.json")["checks"][TEST]["outputs"]["outputs"]["logits"]
    new = bundle_doc(digits_incident["new"], "golden.json")["checks"][TEST]["outputs"]["outputs"]["logits"]
    row = next(m for m in config["metrics"] if m["metric"] == "mean entropy")
    assert row["old"] == old["metrics"]["drift"]["entropy"]["obtained"]
    assert row["new"] == new["metrics"]["drift"]["entropy"]["obtained"]
    assert row["golden"] == new["metrics"]["drift"]["entropy"]["golden"]
    # the incident's figures, from ONNX Runtime's INT8 kernels, whose sums differ by CPU (an AVX2 machine without
    # VNNI gives 0.0711 and 0.2608): within 0.001 of them, the jump from golden to new is 0.19
    assert row["golden"] == pytest.approx(0.0706, abs=0.001) and row["new"] == pytest.approx(0.2603, abs=0.001)
    acc = next(m for m in config["metrics"] if m["metric"] == "accuracy" and m["tag"] is None)
    assert acc["golden"] == round(new["metrics"]["golden_accuracy"] * 100, 10) or abs(
        acc["golden"] - new["metrics"]["golden_accuracy"] * 100) < 1e-9
    assert "l2_delta vs golden" in html and "<th>golden</th>" in html


def test_the_html_holds_the_approve_command(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    _, config, html = _review(digits_incident, tmp_path)
    cmd = re.search(r'<pre class="cmd">(pytest [^<]*)</pre>', html)
    assert cmd is not None
    text = cmd.group(1).replace("&quot;", '"')
    assert text.startswith(f"pytest {TEST} --trt-backend onnxruntime")
    assert '--trt-update-golden --trt-approve "REASON"' in text and text.endswith("--trt-approve-report r.html")


def test_unchecked_outputs_exit_1_naming_the_failing_test(digits_incident: dict[str, Path], tmp_path: Path) -> None:
    code, config, html = _review(digits_incident, tmp_path, new="unchecked")
    assert code == 1 and config["verdict"] == "changed (outputs not checked)"
    reason = next(r for r in config["reasons"] if r.startswith("outputs not checked: "))
    assert reason.startswith(f"outputs not checked: {FAILS_FIRST} failed before its golden check: "
                             "AssertionError: digits_mnet v1.0.0 [")
    assert "expected INT8 calibration with 'entropy'" in reason
    assert "--trt-approve-report" not in html  # nothing to approve
    plain = cli("upgrade-report", digits_incident["old"], digits_incident["unchecked"], "--no-html")
    assert plain.returncode == 1 and "approve with:" not in plain.stdout
    allowed, _, html = _review(digits_incident, tmp_path, "--allow-unchecked", new="unchecked")
    assert allowed == 0 and "--trt-approve-report r.html" in html
