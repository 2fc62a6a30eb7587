"""engine_inputs and build_configs, checked with hypothesis itself on real ONNX Runtime engines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from pytest_trt import Profile
from pytest_trt.errors import TrtError
from pytest_trt.strategies import ValueRange, build_configs, engine_inputs, golden_range
from tests.conftest import needs_rtx

FAST = settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@st.composite
def profiles(draw):
    """Random valid profiles for the mixed model: N shared by all inputs, H free."""
    n = sorted(draw(st.lists(st.integers(1, 16), min_size=3, max_size=3)))
    h = sorted(draw(st.lists(st.integers(1, 16), min_size=3, max_size=3)))
    return Profile(x=((n[0], h[0], 4), (n[1], h[1], 4), (n[2], h[2], 4)),
                   h=((n[0], 3), (n[1], 3), (n[2], 3)), i=((n[0],), (n[1],), (n[2],)), b=((n[0],), (n[1],), (n[2],)))


@FAST
@given(data=st.data(), profile=profiles())
def test_drawn_shapes_always_lie_inside_the_profile(mixed_engine, data, profile):
    feeds = data.draw(engine_inputs(mixed_engine, profile=profile))
    assert sorted(feeds) == ["b", "h", "i", "x"]
    for r in profile.inputs:
        shape = feeds[r.name].shape
        assert all(lo <= d <= hi for lo, d, hi in zip(r.min, shape, r.max, strict=True)), (r, shape)
    assert len({a.shape[0] for a in feeds.values()}) == 1  # the batch is shared


@FAST
@given(data=st.data())
def test_dtypes_come_from_the_engine_and_values_stay_in_range(mixed_engine, data):
    feeds = data.draw(engine_inputs(mixed_engine, elements={"x": (-3.5, 2.0), "h": (0.0, 0.5), "i": (-7, 7)}))
    assert {k: v.dtype.name for k, v in feeds.items()} == {"x": "float32", "h": "float16", "i": "int32", "b": "bool"}
    assert -3.5 <= feeds["x"].min() and feeds["x"].max() <= 2.0
    assert 0.0 <= feeds["h"].min() and feeds["h"].max() <= 0.5
    assert -7 <= feeds["i"].min() and feeds["i"].max() <= 7
    out = mixed_engine.run(feeds)  # the engine accepts every drawn dict
    np.testing.assert_array_equal(out["x2"], 2 * feeds["x"])


@FAST
@given(data=st.data())
def test_shapes_of_either_profile_are_drawn_and_accepted(mixed_engine, data):
    feeds = data.draw(engine_inputs(mixed_engine))
    n = feeds["x"].shape[0]
    assert 1 <= n <= 8 or 9 <= n <= 12
    assert mixed_engine.run(feeds)["b_out"].shape == (n,)


def test_shrinking_reaches_the_opt_shape(mixed_engine):
    smallest = find(engine_inputs(mixed_engine, profile=0), lambda feeds: True, settings=settings(database=None))
    assert {k: v.shape for k, v in smallest.items()} == {"x": (4, 5, 4), "h": (4, 3), "i": (4,), "b": (4,)}
    second = find(engine_inputs(mixed_engine, profile=1), lambda feeds: True, settings=settings(database=None))
    assert second["x"].shape == (10, 2, 4)
    # a condition on the shape shrinks to the opt dim nearest to it
    wide = find(engine_inputs(mixed_engine, profile=0), lambda f: f["x"].shape[1] >= 7,
                settings=settings(database=None))
    assert wide["x"].shape == (4, 7, 4)


def test_golden_range_bounds_the_values(mnv2_engine):
    data = {"input": np.random.default_rng(3).uniform(-0.25, 0.75, (16, 3, 32, 32)).astype(np.float32)}
    rng = golden_range(data)["input"]
    assert (rng.source, round(rng.low, 2), round(rng.high, 2)) == ("golden dataset", -0.25, 0.75)

    @FAST
    @given(feeds=engine_inputs(mnv2_engine, elements=golden_range(data)))
    def inside(feeds):
        assert rng.low <= feeds["input"].min() and feeds["input"].max() <= rng.high
        assert 1 <= feeds["input"].shape[0] <= 8

    inside()


def test_calibration_range_reads_the_npy_batches(tmp_path, models):
    from pytest_trt import BuildConfig, Calibration
    from pytest_trt.strategies import calibration_range

    np.save(tmp_path / "b0.npy", np.full((2, 3, 32, 32), -2.0, np.float32))
    np.save(tmp_path / "b1.npy", np.full((2, 3, 32, 32), 5.0, np.float32))
    cfg = BuildConfig(name="cal", onnx=models["mobilenet_v2"], precision="int8",
                      calibration=Calibration(data=str(tmp_path / "b*.npy")))
    got = calibration_range(cfg)
    assert (got[""].low, got[""].high) == (-2.0, 5.0)


def test_user_errors_name_the_fix(mixed_engine):
    with pytest.raises(TrtError, match="profile=5, but the config has 2 profile"):
        engine_inputs(mixed_engine, profile=5)
    with pytest.raises(TrtError, match=r"elements names unknown input\(s\) \['y'\]"):
        engine_inputs(mixed_engine, elements={"y": (0, 1)})
    with pytest.raises(TrtError, match="must be finite with low <= high"):
        ValueRange(2.0, 1.0)


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_drawn_config_builds_and_matches_the_reference(models, data):
    from tests.properties.conftest import ort_engine

    config = data.draw(build_configs(models["conv_bn_relu"], max_dim=4))
    for p in config.profiles:
        r = p["input"]
        assert r.min[1:] == r.max[1:] == (3, 16, 16) and 1 <= r.min[0] <= r.opt[0] <= r.max[0] <= 4
    engine = ort_engine(config)
    engine.assert_matches_reference(data.draw(engine_inputs(engine, elements=(0.0, 1.0))), rtol=1e-4, atol=1e-4)




@needs_rtx
@settings(max_examples=3, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_drawn_tensorrt_configs_build_with_tensorrt_rtx(models, data):
    from pytest_trt.backends.tensorrt import TensorRTBackend

    config = data.draw(build_configs(models["conv_bn_relu"], backend="tensorrt-rtx", max_dim=4, max_profiles=2))
    assert config.ort is None and 0 <= config.builder_optimization_level <= 5
    result = TensorRTBackend("tensorrt_rtx").build_config(config)
    effective = result.effective_config
    assert effective["builder_optimization_level"] == config.builder_optimization_level
    assert effective["num_optimization_profiles"] == len(config.profiles) >= 1
