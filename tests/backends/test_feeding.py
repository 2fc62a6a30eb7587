"""Engine.run through backends.feeding on real ONNX Runtime engines: checks, messages, batching, the reference runner."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trt.backends.base import Runner, TensorSpec
from pytest_trt.backends.feeding import expected_inputs_text, run_checked
from pytest_trt.config import BuildConfig, OrtOptions, Profile
from pytest_trt.engines.engine import Engine
from pytest_trt.errors import BuildFailed, InputMismatch
from tests.conftest import needs_ort

pytestmark = needs_ort
MNV2_PROFILE = Profile(input=((1, 3, 32, 32), (8, 3, 32, 32), (16, 3, 32, 32)))


def _engine(config: BuildConfig) -> Engine:
    from pytest_trt.backends.onnxruntime import OrtBackend

    backend = OrtBackend()
    return Engine(config, backend.build_config(config), backend)


@pytest.fixture(scope="module")
def mnv2(models: dict[str, Path]) -> Engine:
    return _engine(BuildConfig(name="mnv2", onnx=models["mobilenet_v2"], profiles=(MNV2_PROFILE,)))


def _x(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, 32, 32)).astype(np.float32)


class Recording:
    """A real runner that remembers the batch sizes it was given."""

    def __init__(self, runner: Runner) -> None:
        self.runner, self.batches = runner, []  # type: ignore[var-annotated]

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.runner.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.runner.outputs

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.batches.append(next(iter(feeds.values())).shape[0])
        return self.runner.run(feeds)


def _mismatch(engine: Engine, feeds: Mapping[str, object]) -> str:
    with pytest.raises(InputMismatch) as ei:
        engine.run(feeds)
    return str(ei.value)


@pytest.mark.parametrize("level", ["extended", "all"])
def test_outputs_match_the_reference(models: dict[str, Path], level: str) -> None:
    engine = _engine(BuildConfig(name="mnv2", onnx=models["mobilenet_v2"], profiles=(MNV2_PROFILE,),
                                 ort=OrtOptions(graph_optimization_level=level)))
    x = _x(8)
    got = engine.run({"input": x})
    want = engine.reference().run({"input": x})
    assert got["logits"].dtype == np.float32 and got["logits"].shape == (8, 10)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-4, atol=1e-5)


def test_reference_runner_is_unoptimized_cpu(mnv2: Engine) -> None:
    ref = mnv2.reference()
    so = ref.session.get_session_options()
    import onnxruntime as ort

    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert ref.session.get_providers() == ["CPUExecutionProvider"] and so.use_deterministic_compute


def test_reference_of_an_unloadable_model_fails_clearly(tmp_path: Path) -> None:
    from pytest_trt.backends.reference import reference_runner

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nope")
    with pytest.raises(BuildFailed, match="reference runner.*could not load.*bad.onnx") as ei:
        reference_runner(BuildConfig(name="bad", onnx=bad))
    assert ei.value.stage == "reference"


@pytest.mark.parametrize("batch", [1, 5, 16])
def test_dynamic_batch_within_the_profile_runs_in_one_call(mnv2: Engine, batch: int) -> None:
    rec = Recording(mnv2.runner)
    out = run_checked(rec, mnv2.config, {"input": _x(batch)}, label="t")
    assert rec.batches == [batch] and out["logits"].shape == (batch, 10)


def test_batch_above_profile_max_is_split_and_concatenated(mnv2: Engine) -> None:
    x = _x(40, seed=3)
    rec = Recording(mnv2.runner)
    out = run_checked(rec, mnv2.config, {"input": x}, label="t")
    assert rec.batches == [14, 13, 13]  # near-equal chunks, none above max 16
    whole = mnv2.reference().run({"input": x})  # the reference has no profile: one call
    np.testing.assert_allclose(out["logits"], whole["logits"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(mnv2.run({"input": x})["logits"], out["logits"])


def test_split_respects_the_profile_min_batch(models: dict[str, Path]) -> None:
    ok = _engine(BuildConfig(name="m", onnx=models["mobilenet_v2"],
                             profiles=(Profile(input=((4, 3, 32, 32), (8, 3, 32, 32), (8, 3, 32, 32))),)))
    rec = Recording(ok.runner)
    run_checked(rec, ok.config, {"input": _x(9)}, label="t")
    assert rec.batches == [5, 4]
    tight = _engine(BuildConfig(name="m", onnx=models["mobilenet_v2"],
                                profiles=(Profile(input=((6, 3, 32, 32), (8, 3, 32, 32), (8, 3, 32, 32))),)))
    msg = _mismatch(tight, {"input": _x(9)})
    assert "batch 9 cannot be split into chunks within the profile's batch range 6..8" in msg


def test_wrong_name_lists_the_expected_inputs(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"inptu": _x(2)})
    assert msg.startswith(f"{mnv2.label}: Engine.run inputs do not match the engine:")
    assert "unknown input 'inptu' (did you mean 'input'?)" in msg
    assert "missing input(s) 'input'" in msg
    assert msg.endswith("the engine expects 1 input(s):\n  input: float32 [1..16, 3, 32, 32]")


def test_missing_and_extra_inputs(mnv2: Engine) -> None:
    assert "missing input(s) 'input'" in _mismatch(mnv2, {})
    assert "unknown input 'extra'" in _mismatch(mnv2, {"input": _x(1), "extra": _x(1)})


def test_wrong_rank(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"input": _x(1)[0]})
    assert "input 'input' has rank 3 (shape (3, 32, 32)), the engine expects rank 4" in msg


def test_wrong_dtype_is_never_cast(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"input": _x(2).astype(np.float64)})
    assert ("input 'input' has dtype float64, the engine expects float32 "
            "(inputs are never cast: convert with .astype(np.float32))") in msg


def test_byte_swapped_dtype_is_named_by_its_type_string(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"input": _x(1).astype(">f4")})
    assert "input 'input' has dtype >f4, the engine expects float32" in msg


def test_feeds_must_be_a_mapping(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, _x(1))  # type: ignore[arg-type]
    assert "Engine.run takes a mapping of input name to numpy array, got ndarray" in msg


def test_accepted_signatures_are_still_checked_per_call(mnv2: Engine) -> None:
    mnv2.run({"input": _x(2)})  # remembered as accepted
    assert "has dtype float64" in _mismatch(mnv2, {"input": _x(2).astype(np.float64)})
    assert "axis 2 is 31" in _mismatch(mnv2, {"input": np.zeros((2, 3, 31, 32), np.float32)})


def test_not_an_array(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"input": _x(1).tolist()})
    assert "input 'input' is a list, not a numpy array (pass np.asarray(value, dtype=np.float32))" in msg


def test_shape_outside_the_profile(mnv2: Engine) -> None:
    msg = _mismatch(mnv2, {"input": np.zeros((2, 3, 24, 32), np.float32)})
    assert "input 'input' has shape (2, 3, 24, 32): axis 2 is 24, outside the profile (32)" in msg
    msg = _mismatch(mnv2, {"input": np.zeros((0, 3, 32, 32), np.float32)})
    assert "axis 0 is 0, outside the profile (the range 1..16)" in msg


def test_static_engine_without_profiles_checks_fixed_dims(models: dict[str, Path]) -> None:
    engine = _engine(BuildConfig(name="b1", onnx=models["mobilenet_v2_b1"]))
    assert engine.run({"input": _x(1)})["logits"].shape == (1, 10)
    msg = _mismatch(engine, {"input": _x(2)})
    assert "axis 0 is 2, outside the engine's fixed dim (1)" in msg
    assert msg.endswith("input: float32 [1, 3, 32, 32]")


def test_dynamic_engine_without_profiles_accepts_any_batch(models: dict[str, Path]) -> None:
    engine = _engine(BuildConfig(name="dyn", onnx=models["mobilenet_v2"]))
    assert engine.run({"input": _x(3)})["logits"].shape == (3, 10)
    assert expected_inputs_text(engine.runner, engine.config).endswith("input: float32 [*, 3, 32, 32]")


def _two_input_argmax(tmp_path: Path) -> Path:
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("ArgMax", ["s"], ["idx"], name="argmax", axis=1, keepdims=0)]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, ["N"])],
    )
    path = tmp_path / "argmax.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def test_two_profiles_int64_outputs_and_split(tmp_path: Path) -> None:
    profiles = (Profile(a=((1, 4), (2, 4), (2, 4)), b=((1, 4), (2, 4), (2, 4))),
                Profile(a=((3, 4), (4, 4), (5, 4)), b=((3, 4), (4, 4), (5, 4))))
    engine = _engine(BuildConfig(name="argmax", onnx=_two_input_argmax(tmp_path), profiles=profiles))
    text = expected_inputs_text(engine.runner, engine.config)
    assert "  a: float32 [1..2, 4] (profile 0) or [3..5, 4] (profile 1)" in text
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((12, 4)).astype(np.float32) for _ in range(2))
    rec = Recording(engine.runner)
    out = run_checked(rec, engine.config, {"a": a, "b": b}, label="t")
    assert rec.batches == [4, 4, 4]  # the roomiest profile (max 5) is used for chunks
    assert out["idx"].dtype == np.int64  # outputs keep the engine's dtype
    np.testing.assert_array_equal(out["idx"], np.argmax(a + b, axis=1))
    msg = _mismatch(engine, {"a": a[:2], "b": b[:3]})
    assert "profile 0" in msg and "profile 1" in msg


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    engine = _engine(BuildConfig(name="argmax", onnx=_two_input_argmax(tmp_path)))
    msg = _mismatch(engine, {"a": np.zeros((2, 4), np.float16), "b": np.zeros(4, np.float32)})
    assert "input 'a' has dtype float16, the engine expects float32" in msg
    assert "input 'b' has rank 1 (shape (4,)), the engine expects rank 2" in msg
