"""Per-sample classifier statistics: the vectorized float32 form against float64 softmax and fixed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_trt.compare.distribution import per_sample


def softmax_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    """Independent float64 reference, written out here (not the product's helper)."""
    x = x.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    s = np.sort(p, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=1)
    return {"max_confidence": s[:, -1], "entropy": h, "top2_margin": s[:, -1] - s[:, -2]}


def test_fixed_values() -> None:
    x = np.array([[0.0, 0.0], [math.log(3.0), 0.0], [0.0, math.log(3.0)]], np.float32)
    x3 = np.array([[math.log(3.0), 0.0, 0.0]], np.float32)
    two, three = per_sample(x, logits=True), per_sample(x3, logits=True)
    assert two["max_confidence"] == pytest.approx([0.5, 0.75, 0.75], abs=1e-6)
    assert two["top2_margin"] == pytest.approx([0.0, 0.5, 0.5], abs=1e-6)
    assert two["entropy"][0] == pytest.approx(math.log(2.0), abs=1e-6)
    assert three["max_confidence"][0] == pytest.approx(0.6, abs=1e-6)
    assert three["top2_margin"][0] == pytest.approx(0.4, abs=1e-6)
    assert three["entropy"][0] == pytest.approx(-(0.6 * math.log(0.6) + 0.4 * math.log(0.2)), abs=1e-6)


@pytest.mark.parametrize(("scale", "offset"), [(1.0, 0.0), (12.0, 0.0), (3.0, 1e4), (60.0, -500.0)])
def test_float32_logits_match_float64_softmax(scale: float, offset: float) -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((300, 1000)) * scale + offset).astype(np.float32)
    got, want = per_sample(x, logits=True), softmax_stats(x)
    for k, v in want.items():
        assert got[k].dtype == np.float64
        np.testing.assert_allclose(got[k], v, atol=2e-6, rtol=1e-5, err_msg=k)


def test_probabilities_and_nonfinite_rows() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal((50, 20)).astype(np.float32)
    x[3, 4] = -np.inf  # a masked class: probability 0
    x[5, 0] = 1e30  # one overwhelming class
    got, want = per_sample(x, logits=True), softmax_stats(x)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, atol=2e-6, err_msg=k)
    p = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True).astype(np.float64))
    p /= p.sum(axis=1, keepdims=True)
    p[:, 7] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    got, want = per_sample(p.astype(np.float32), logits=False), softmax_stats(np.log(np.maximum(p, 1e-300)))
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, atol=2e-6, err_msg=k)


def test_ties_give_zero_margin() -> None:
    x = np.array([[2.0, 5.0, 5.0, 1.0]], np.float32)
    assert per_sample(x, logits=True)["top2_margin"][0] == 0.0


def test_bootstrap_sds_equal_separate_bootstraps() -> None:
    from pytest_trt.compare.distribution import bootstrap_sds

    def separate(v: np.ndarray) -> float:  # the seeded loop, written out: 200 resamples, seed 0
        rng = np.random.default_rng(0)
        means = [v[rng.integers(0, v.size, v.size)].mean() for _ in range(200)]
        return float(np.std(means, ddof=1))

    rng = np.random.default_rng(3)
    values = {"a": rng.standard_normal(500), "b": rng.exponential(size=500), "c": np.ones(500)}
    got = bootstrap_sds(values)
    for k, v in values.items():
        assert got[k] == pytest.approx(separate(v), rel=1e-12, abs=1e-15), k
    assert bootstrap_sds({"one": np.ones(1)}) == {"one": 0.0}


def test_large_sets_take_the_closed_form_the_bootstrap_estimates() -> None:
    from pytest_trt.compare.distribution import BOOTSTRAP_MAX, bootstrap_sds

    rng = np.random.default_rng(4)
    big = rng.exponential(size=BOOTSTRAP_MAX + 1)
    assert bootstrap_sds({"x": big})["x"] == pytest.approx(np.std(big) / math.sqrt(big.size), rel=1e-12)
    small = big[:BOOTSTRAP_MAX]  # resampled: close to, not equal to, the closed form
    sd = bootstrap_sds({"x": small})["x"]
    assert sd != np.std(small) / math.sqrt(small.size)
    assert sd == pytest.approx(np.std(small) / math.sqrt(small.size), rel=0.15)


def test_top1_is_the_first_maximum() -> None:
    from pytest_trt.compare.distribution import per_sample_top1

    x = np.array([[2.0, 5.0, 5.0, 1.0], [9.0, 0.0, 1.0, 2.0], [0.0, 0.0, 0.0, 3.0]], np.float32)
    _, top = per_sample_top1(x, logits=True)
    assert top.tolist() == [1, 0, 3] and top.dtype == np.int64


@pytest.mark.parametrize("vecdot", [True, False], ids=["vecdot", "einsum"])
def test_row_dots_are_float32_dot_products_within_their_rounding_bound(monkeypatch: pytest.MonkeyPatch,
                                                                      vecdot: bool) -> None:
    from pytest_trt.compare import distribution

    if not vecdot:
        monkeypatch.setattr(distribution, "_VECDOT", None)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 1000)).astype(np.float32)
    b = np.exp(rng.standard_normal((64, 1000))).astype(np.float32)
    got = distribution.row_dots(a, b)
    exact = (a.astype(np.float64) * b.astype(np.float64)).sum(axis=1)  # products of float32 are exact in float64
    # recursive float32 summation of n products: |error| <= n * 2**-24 * sum |a b| (Higham, 3.1)
    bound = 1000 * 2.0**-24 * (np.abs(a.astype(np.float64)) * b).sum(axis=1)
    assert got.shape == (64,)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)
    assert not np.allclose(got, (a * a).sum(axis=1), rtol=1e-3)  # not the other operand's squares
