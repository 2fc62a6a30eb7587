"""The differential property: engine vs the unoptimized reference, on any drawn input; the planted bug is found."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from pytest_trt.strategies import engine_inputs
from tests.properties.conftest import rng_images

PROPERTY = settings(max_examples=25, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def test_the_example_engine_matches_the_reference_on_any_drawn_input(mnv2_engine):
    @PROPERTY
    @given(feeds=engine_inputs(mnv2_engine, elements=(-4.0, 4.0)))
    def prop(feeds):
        mnv2_engine.assert_matches_reference(feeds, rtol=1e-4, atol=1e-4, cosine=0.9999)

    prop()


def test_the_planted_bug_is_invisible_on_image_range_inputs(planted_engine, models):
    planted_engine.assert_matches_reference(rng_images(8, high=1.0), reference=models["mobilenet_v2"])


def test_hypothesis_finds_and_shrinks_the_planted_bug(planted_engine, models):
    failing: list[dict[str, np.ndarray]] = []

    @PROPERTY
    @given(feeds=engine_inputs(planted_engine, elements=(0.0, 4.0)))
    def prop(feeds):
        try:
            planted_engine.assert_matches_reference(feeds, rtol=1e-4, atol=1e-4, reference=models["mobilenet_v2"])
        except AssertionError:
            failing.append(feeds)
            raise

    with pytest.raises(AssertionError) as info:
        prop()
    text = str(info.value)
    shrunk = failing[-1]["input"]
    # shrunk: the profile's opt shape, one constant value everywhere, as small as still fails (a stem activation > 6)
    assert shrunk.shape == (4, 3, 32, 32)
    assert np.unique(shrunk).size == 1 and 2.0 < float(shrunk.flat[0]) <= 4.0
    assert "mnv2_planted" in text and "shape (4, 10)" in text
    assert re.search(r"max abs error [0-9.e-]+, max rel error [0-9.e+-]+; worst element \(\d, \d\): engine", text)
    atol_needed = float(re.search(r"would have passed with atol=([0-9.e+-]+)", text).group(1))
    import onnxruntime as ort  # independent of the code under test: a plain session on the correct model

    want = ort.InferenceSession(str(models["mobilenet_v2"])).run(None, {"input": shrunk})[0]
    got = planted_engine.run({"input": shrunk})["logits"]
    assert atol_needed == pytest.approx(np.max(np.abs(got - want) - 1e-4 * np.abs(want)), rel=1e-2)


def test_failure_message_numbers_are_exact(mnv2_engine):
    from pytest_trt.compare.differential import compare_outputs, render_failure

    want = {"y": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)}
    got = {"y": np.array([[1.0, 2.5], [3.0, 4.0]], np.float32)}
    diffs = compare_outputs(got, want, rtol=0.01, atol=0.1, cosine=0.9999)
    (d,) = diffs
    assert (d.passed, d.worst_index, d.max_abs, d.violations) == (False, (0, 1), 0.5, 1)
    assert d.atol_needed == pytest.approx(0.5 - 0.01 * 2.0) and d.rtol_needed == pytest.approx((0.5 - 0.1) / 2.0)
    text = render_failure("E", diffs, {"x": np.zeros((2, 2), np.float32)}, rtol=0.01, atol=0.1, cosine=0.9999)
    assert "output 'y' shape (2, 2): 1/4 elements beyond atol=0.1 + rtol=0.01*|ref|; max abs error 0.5, " \
           "max rel error 0.25; worst element (0, 1): engine 2.5, reference 2" in text
    assert "would have passed with atol=0.48 (rtol=0.01) or rtol=0.2 (atol=0.1)" in text
    assert "cosine similarity 0.99" in text


def test_cosine_alone_can_fail(mnv2_engine):
    from pytest_trt.compare.differential import compare_outputs

    want = {"y": np.array([1.0, 0.0], np.float32)}
    got = {"y": np.array([1.0, 0.05], np.float32)}
    (d,) = compare_outputs(got, want, rtol=0.0, atol=0.1, cosine=0.9999)
    assert d.violations == 0 and not d.passed and d.cosine == pytest.approx(1 / np.sqrt(1.0025))
