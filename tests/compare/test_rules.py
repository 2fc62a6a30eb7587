"""The verdict's rule table: one row per threshold, and the rows drive the checks, the lines and the table."""

from __future__ import annotations

from dataclasses import fields, replace

import pytest

from pytest_trt.compare.assess import assess
from pytest_trt.compare.metrics import ElementStats, TagMetrics
from pytest_trt.compare.render import metrics_table, render_deltas
from pytest_trt.compare.rules import RULES, report_bounds, rule
from pytest_trt.compare.thresholds import Thresholds
from pytest_trt.compare.verdict import FAIL, INFO, NOT_EVALUATED, PASS, OutputMetrics

ELEMENTS = ElementStats(count=10, max_abs=0.25, max_rel=0.5, l2_delta=0.18, cosine=0.99, golden_norm=3.0,
                        nonfinite_obtained=0, nonfinite_golden=0)


def classifier(**changes: object) -> OutputMetrics:
    m = OutputMetrics("logits", 1000, ELEMENTS, top1_agreement=0.853, accuracy=0.773, golden_accuracy=0.92,
                      tags=(TagMetrics("edge", 40, 0.9, 0.5, 0.6),))
    return replace(m, **changes)  # type: ignore[arg-type]


def test_one_row_per_threshold() -> None:
    assert sorted(r.name for r in RULES) == sorted(f.name for f in fields(Thresholds))
    assert [r.name for r in RULES] == ["allow_nonfinite", "l2_delta", "max_abs", "max_rel", "cosine",
                                       "top1_agreement", "top1_drop", "drift_sd"]


def test_bounds_point_the_documented_way_and_equality_passes() -> None:
    l2, cosine = rule("l2_delta"), rule("cosine")
    assert l2.measure("o", 0.18, 0.05).status == FAIL and l2.measure("o", 0.05, 0.05).status == PASS
    assert l2.measure("o", 0.18, 0.05).text == "Output L2 norm delta: 0.18 > threshold(0.05)"
    assert cosine.measure("o", 0.99, 0.995).status == FAIL and cosine.measure("o", 0.995, 0.995).status == PASS
    assert cosine.measure("o", 0.99, 0.995).text == "Cosine similarity: 0.990000 < threshold(0.995000)"
    assert rule("top1_agreement").measure("o", 0.75, 0.75).text == "Top-1 agreement: 75.0% >= threshold(75.0%)"


def test_the_table_drives_the_checks_of_a_classifier() -> None:
    t = Thresholds(l2_delta=0.05, max_abs=0.3, max_rel=None, cosine=0.995, top1_agreement=None, top1_drop=0.005,
                   drift_sd=3.0)
    checks = assess(classifier(), t)
    got = [(c.metric, c.status, c.tag) for c in checks]
    assert got == [("l2_delta", FAIL, None), ("max_abs", PASS, None), ("cosine", FAIL, None),
                   ("top1_agreement", INFO, None), ("top1_drop", FAIL, None), ("top1_drop", FAIL, "edge"),
                   ("drift_sd", NOT_EVALUATED, None)]
    drop = checks[4]
    assert drop.value == pytest.approx(0.147) and drop.text.startswith("Top-1 Acc drop: -14.7% < threshold(-0.5%)")


def test_classifier_rows_are_not_evaluated_on_other_outputs() -> None:
    t = Thresholds(top1_agreement=0.99, top1_drop=0.005, drift_sd=3.0)
    checks = assess(OutputMetrics("boxes", 10, ELEMENTS), t)
    skipped = [c for c in checks if c.status == NOT_EVALUATED]
    assert [c.metric for c in skipped] == ["top1_agreement", "top1_drop", "drift_sd"]
    assert all("not declared or detected as class scores" in (c.reason or "") for c in skipped)


def test_columns_and_refresh_summary_come_from_the_rows() -> None:
    lines = metrics_table([classifier(), OutputMetrics("boxes", 1000, ELEMENTS)])
    assert lines[0].split() == ["output", "samples", "l2_delta", "max_abs", "max_rel", "cosine", "top1_agree",
                                "accuracy"]
    assert lines[1].split() == ["logits", "1000", "0.18", "0.25", "0.5", "0.990000", "85.3%", "92.0%", "->",
                                "77.3%"]
    assert lines[2].split() == ["boxes", "1000", "0.18", "0.25", "0.5", "0.990000", "-", "-"]
    (line,) = render_deltas("g.h5 [m] generation 2", {"logits": classifier()}, previous=1)
    assert line == ("g.h5 [m] generation 2: logits: L2 delta 0.18, max abs 0.25, cosine 0.990000, "
                    "top-1 agreement 85.3%, accuracy 92.0% -> 77.3% (-14.7%)")


def test_the_upgrade_review_reads_its_bounds_from_the_rows() -> None:
    assert report_bounds() == {"l2_delta": ("l2_delta", "max"), "max_abs": ("max_abs", "max"),
                               "max_rel": ("max_rel", "max"), "cosine": ("cosine", "min"),
                               "top1_agreement": ("top1_agreement", "min")}
