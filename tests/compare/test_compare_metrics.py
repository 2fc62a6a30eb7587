"""Metrics, thresholds and the rendered message, including the seed incident's exact figures."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_trt.compare import distribution
from pytest_trt.compare.assess import evaluate
from pytest_trt.compare.metrics import ElementAccumulator, element_stats, per_tag, split_tags, top1
from pytest_trt.compare.render import render_regression
from pytest_trt.compare.thresholds import Thresholds, ThresholdSet, parse_ini_value
from pytest_trt.compare.verdict import OutputMetrics
from pytest_trt.errors import GoldenError


def seed_pair() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1000 samples, 10 classes: golden 92.0% accurate; obtained 77.3% (147 flipped); relative L2 exactly 0.18."""
    n, c = 1000, 10
    labels = np.arange(n) % c
    golden = np.zeros((n, c))
    wrong = (labels + 1) % c
    golden[np.arange(n), labels] = 1.0
    golden[np.arange(n), wrong] = 0.9
    golden[np.arange(920, n), labels[920:]] = 0.5  # the last 80 samples: golden is wrong
    obtained = golden.copy()
    flipped = np.arange(147)
    # ||d||^2 must be 0.18^2 * ||g||^2; the whole delta sits on the flipped samples' wrong class
    t = np.sqrt(0.18**2 * np.sum(golden**2) / flipped.size)
    assert t > 0.1  # enough to flip each argmax
    obtained[flipped, wrong[flipped]] += t
    return obtained.astype(np.float32), golden.astype(np.float32), labels


def metrics_of(obtained: np.ndarray, golden: np.ndarray, labels: np.ndarray | None = None) -> OutputMetrics:
    e = element_stats(obtained, golden)
    o, g = top1(obtained), top1(golden)
    acc = None if labels is None else float(np.mean(o == labels))
    gacc = None if labels is None else float(np.mean(g == labels))
    return OutputMetrics("logits", obtained.shape[0], e, float(np.mean(o == g)), acc, gacc)


def test_seed_incident_figures_in_message() -> None:
    obtained, golden, labels = seed_pair()
    m = metrics_of(obtained, golden, labels)
    assert m.elements.l2_delta == pytest.approx(0.18, abs=1e-6)
    assert m.golden_accuracy == pytest.approx(0.92)
    assert m.accuracy == pytest.approx(0.773)
    breaches = evaluate(m, Thresholds(l2_delta=0.05, top1_drop=0.005))
    text = render_regression(golden="golden/mobilenet_v2.h5 [mobilenet_v2]", breaches=breaches, metrics=[m])
    lines = text.splitlines()
    assert "[REGRESSION] logits: Output L2 norm delta: 0.18 > threshold(0.05)" in lines
    assert any(line.startswith("[REGRESSION] logits: Top-1 Acc drop: -14.7% ") and "92.0% -> 77.3%" in line
               for line in lines)
    assert lines[-1].strip() == 'pytest --trt-engine-build --trt-update-golden --trt-approve "REASON"'


def test_within_thresholds_has_no_breach() -> None:
    _, golden, labels = seed_pair()
    assert evaluate(metrics_of(golden, golden, labels), Thresholds()) == ()


def test_nonfinite_obtained_always_fails_unless_allowed() -> None:
    g = np.ones((4, 3), np.float32)
    o = g.copy()
    o[1, 2] = np.nan
    o[3, 0] = np.inf
    m = metrics_of(o, g)
    assert m.elements.nonfinite_obtained == 2
    assert m.elements.l2_delta == 0.0  # the finite pairs agree
    texts = [b.text for b in evaluate(m, Thresholds(l2_delta=None, top1_drop=None))]
    assert any("2 NaN/Inf in the obtained output" in t for t in texts)
    # allowed: only the argmax of the NaN row moved, which the unlabelled agreement check (99.5 %) sees
    assert [b.text.split(":")[0] for b in evaluate(m, Thresholds(allow_nonfinite=True))] == ["Top-1 agreement"]
    assert evaluate(m, Thresholds(allow_nonfinite=True, top1_drop=None)) == ()


def test_every_breach_is_listed() -> None:
    obtained, golden, labels = seed_pair()
    t = Thresholds(l2_delta=0.05, max_abs=0.01, max_rel=0.01, cosine=0.999, top1_agreement=0.99, top1_drop=0.005)
    texts = [b.text.split(":")[0] for b in evaluate(metrics_of(obtained, golden, labels), t)]
    assert texts == ["Output L2 norm delta", "Max abs error", "Max rel error", "Cosine similarity",
                     "Top-1 agreement", "Top-1 Acc drop"]


def test_streaming_equals_whole_array_in_float64() -> None:
    rng = np.random.default_rng(1)
    g = rng.standard_normal(1_000_003).astype(np.float32)
    o = g + np.float32(1e-3) * rng.standard_normal(g.size).astype(np.float32)
    acc = ElementAccumulator(block=4096)
    for s in range(0, g.size, 77_777):
        acc.update(o[s : s + 77_777], g[s : s + 77_777])
    streamed = acc.result()
    d = o.astype(np.float64) - g.astype(np.float64)
    assert streamed.l2_delta == pytest.approx(np.linalg.norm(d) / np.linalg.norm(g.astype(np.float64)), rel=1e-9)
    assert streamed.max_abs == pytest.approx(np.abs(d).max(), rel=1e-6)
    cos = np.dot(o.astype(np.float64), g) / (np.linalg.norm(o.astype(np.float64)) * np.linalg.norm(g.astype(np.float64)))
    assert streamed.cosine == pytest.approx(cos, abs=1e-12)


def test_zero_golden_gives_inf_relative_error() -> None:
    s = element_stats(np.array([0.0, 1.0]), np.array([0.0, 0.0]))
    assert s.max_rel == np.inf and s.l2_delta == np.inf
    assert element_stats(np.zeros(3), np.zeros(3)).l2_delta == 0.0


def test_per_tag_breakdown_and_breach() -> None:
    labels = np.array([0, 1, 2, 0, 1, 2])
    golden = labels.copy()
    obtained = np.array([0, 1, 2, 1, 2, 0])
    tags = ["", "edge", "", "past-error", "past-error,edge", "past-error"]
    assert set(split_tags(tags)) == {"edge", "past-error"}
    rows = {t.tag: t for t in per_tag(obtained, golden, labels, tags)}
    assert rows["past-error"].count == 3 and rows["past-error"].accuracy == 0.0
    assert rows["edge"].accuracy_drop == pytest.approx(-0.5)
    m = OutputMetrics("pred", 6, element_stats(obtained, golden), 0.5, 0.5, 1.0, tuple(rows.values()))
    lines = [b.line() for b in evaluate(m, Thresholds(l2_delta=None))]
    assert any(line.startswith("[REGRESSION] pred[tag=past-error]: Top-1 Acc drop: -100.0%") for line in lines)


def test_distribution_drift_in_bootstrap_sds() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((500, 10)) * 3
    base = distribution.baseline(logits)
    assert base.logits
    assert distribution.baseline(logits) == base  # fixed seed: same SDs every time
    same = distribution.drift(base, distribution.per_sample(logits, logits=True))
    assert all(d.drift_sd == 0.0 for d in same)
    # INT8-calibration-like squashing: every sample less confident
    moved = distribution.drift(base, distribution.per_sample(logits * 0.7, logits=True))
    by = {d.stat: d for d in moved}
    assert by["max_confidence"].obtained_mean < by["max_confidence"].golden_mean
    assert by["max_confidence"].drift_sd > 3
    probs = distribution.probabilities(logits, logits=True)
    assert distribution.looks_like_probabilities(probs) and not distribution.looks_like_probabilities(logits)


def test_thresholds_validation_and_layering() -> None:
    with pytest.raises(GoldenError, match="valid thresholds"):
        Thresholds().updated({"l2": 0.1})
    with pytest.raises(GoldenError, match="non-negative"):
        Thresholds(l2_delta=-1)
    ts = ThresholdSet().with_overrides({"l2_delta": 0.1}, {"boxes": {"max_abs": 0.5}})
    assert ts.for_output("logits").l2_delta == 0.1
    assert ts.for_output("boxes").max_abs == 0.5 and ts.for_output("boxes").l2_delta == 0.1
    assert parse_ini_value("l2_delta", "none") is None
    assert parse_ini_value("allow_nonfinite", "true") is True
    with pytest.raises(GoldenError, match="trt_golden_cosine"):
        parse_ini_value("cosine", "high")


def test_render_caps_long_lists() -> None:
    obtained, golden, _ = seed_pair()
    m = metrics_of(obtained, golden)
    many = [m.__class__(f"out{i}", m.samples, m.elements) for i in range(40)]
    breaches = [b for x in many for b in evaluate(x, Thresholds())]
    text = render_regression(golden="g", breaches=breaches, metrics=many, nodeid="t.py::test")
    assert "... 10 more breached thresholds not shown" in text
    assert "... 28 more outputs not shown" in text
    assert 'pytest t.py::test --trt-engine-build --trt-update-golden --trt-approve "REASON"' in text


finite_arrays = hnp.arrays(np.float32, st.integers(1, 300),
                           elements=st.floats(-1e4, 1e4, allow_nan=False, width=32))


@given(finite_arrays)
def test_identical_arrays_give_zero_deltas(a: np.ndarray) -> None:
    s = element_stats(a, a.copy())
    assert s.max_abs == 0.0 and s.l2_delta == 0.0
    assert s.max_rel == 0.0
    if np.any(a != 0):
        assert s.cosine == pytest.approx(1.0, abs=1e-12)


@given(finite_arrays, finite_arrays, st.sampled_from([0.5, 2.0, 4.0, 1024.0]))
def test_relative_l2_and_cosine_are_scale_invariant(a: np.ndarray, b: np.ndarray, k: float) -> None:
    n = min(a.size, b.size)
    g, o = a[:n], b[:n]
    base = element_stats(o, g)
    scaled = element_stats(o * np.float32(k), g * np.float32(k))  # powers of two: exact in float32
    assert scaled.l2_delta == pytest.approx(base.l2_delta, rel=1e-9, abs=1e-12) or np.isinf(base.l2_delta)
    assert scaled.cosine == pytest.approx(base.cosine, abs=1e-9)


@given(finite_arrays, finite_arrays)
def test_metrics_never_crash_and_stay_in_range(a: np.ndarray, b: np.ndarray) -> None:
    n = min(a.size, b.size)
    s = element_stats(a[:n], b[:n])
    assert -1.0 <= s.cosine <= 1.0
    assert s.l2_delta >= 0 and s.max_abs >= 0 and s.count == n


def test_drift_of_near_uniform_outputs_has_a_floor() -> None:
    rng = np.random.default_rng(7)
    golden = (1e-7 * rng.standard_normal((256, 1000))).astype(np.float64)  # near-uniform over 1000 classes
    base = distribution.baseline(golden)
    stats = {s.stat: s for s in base.stats}
    assert stats["entropy"].mean == pytest.approx(np.log(1000), abs=1e-9)
    assert stats["entropy"].sd < 1e-9  # the bootstrap SD alone would make any change thousands of SDs
    moved = golden + 1e-6 * rng.standard_normal(golden.shape)
    drifts = distribution.drift(base, distribution.per_sample(moved, logits=True))
    assert all(d.drift_sd < 0.01 for d in drifts), [(d.stat, d.drift_sd) for d in drifts]
    entropy = next(d for d in drifts if d.stat == "entropy")
    assert entropy.floor == pytest.approx(1e-3 * np.log(1000))  # 0.1 % of the statistic's scale
    m = OutputMetrics("logits", 256, element_stats(moved, golden), 1.0, drift=drifts)
    assert not [b for b in evaluate(m, Thresholds(l2_delta=None)) if "drift" in b.text]


def test_drift_floor_still_sees_a_real_shift() -> None:
    rng = np.random.default_rng(8)
    golden = rng.standard_normal((500, 10)) * 3.0
    base = distribution.baseline(golden)
    cooler = distribution.drift(base, distribution.per_sample(golden * 0.9, logits=True))  # calibration-like shift
    by = {d.stat: d for d in cooler}
    assert by["max_confidence"].drift_sd > 3 and by["max_confidence"].sd > by["max_confidence"].floor


_LIMITS = st.one_of(st.none(), st.floats(0, 1, allow_nan=False))


@given(
    classifier=st.booleans(), labelled=st.booleans(), drift=st.booleans(),
    limits=st.fixed_dictionaries({n: _LIMITS for n in ("l2_delta", "max_abs", "max_rel", "cosine",
                                                        "top1_agreement", "top1_drop", "drift_sd")}),
)
def test_every_threshold_set_is_evaluated_or_refused(classifier: bool, labelled: bool, drift: bool,
                                                     limits: dict[str, float | None]) -> None:
    from pytest_trt.compare.assess import assess, refusals

    rng = np.random.default_rng(0)
    golden = rng.standard_normal((20, 4))
    e = element_stats(golden * 1.01, golden)
    drifts = distribution.drift(distribution.baseline(golden), distribution.per_sample(golden, logits=True))
    m = OutputMetrics("out", 20, e, 0.9 if classifier else None, 0.5 if classifier and labelled else None,
                      0.6 if classifier and labelled else None, drift=drifts if classifier and drift else ())
    checks = assess(m, Thresholds(**limits))
    given_names = frozenset(n for n, v in limits.items() if v is not None)
    refused = refusals(checks, given_names, {})
    evaluated = {c.metric for c in checks if c.evaluated}
    for name in given_names:
        assert name in evaluated or any(r.startswith(name) for r in refused), (name, checks, refused)
    for c in checks:  # a check's verdict agrees with its own numbers
        if c.evaluated:
            assert c.value is not None and c.threshold is not None
            if c.metric == "cosine" or c.metric == "top1_agreement":
                assert (c.status == "pass") == (c.value >= c.threshold)
            else:
                assert (c.status == "pass") == (c.value <= c.threshold)
