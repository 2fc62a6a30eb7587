"""Property-based differential testing: the engine against the plain ONNX semantics, on any input it admits.

    pytest --trt-backend onnxruntime --trt-engine-build examples/test_properties.py

``engine_inputs(engine)`` draws inputs anywhere inside the optimization
profile (shapes shrink toward the profile's opt shape) with values in a range;
``assert_matches_reference`` compares with the unoptimized reference runner.
On a failure hypothesis shrinks the input, and the message shows the shape,
the max abs/rel error, the worst element and the tolerance that would have
passed.

The second test is a planted bug, kept to show what a finding looks like: the
engine is built from a copy of the model whose stem ReLU became a ReLU6 (as a
wrong conv+bn+relu fusion would), while the reference runs the approved model.
Images in 0..1 never show it; the property over 0..4 finds it and shrinks it
to one constant value at the opt shape.
"""

from __future__ import annotations

import pytest

# hypothesis is the `hypothesis` extra, not part of the README's quick start (`.[rtx,ort,attest]`): skip, do not error
pytest.importorskip("hypothesis", reason="examples/test_properties.py needs hypothesis: "
                    "pip install 'pytest-trt[hypothesis]'")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from examples.conftest import MODELS  # noqa: E402
from pytest_trt import BuildConfig, OrtOptions, Profile  # noqa: E402
from pytest_trt.strategies import engine_inputs  # noqa: E402

PROFILE = Profile(input=((1, 3, 32, 32), (4, 3, 32, 32), (8, 3, 32, 32)))
MNV2 = BuildConfig(name="mobilenet_v2_props", version="1.0.0", onnx=MODELS["mobilenet_v2"], profiles=[PROFILE],
                   ort=OrtOptions(graph_optimization_level="extended"))
PLANTED = BuildConfig(name="mobilenet_v2_planted", version="1.0.0", onnx=MODELS["mobilenet_v2_planted"],
                      profiles=[PROFILE], ort=OrtOptions(graph_optimization_level="extended"))
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _cpu_backend_only(trt_backend):
    if trt_backend.name != "onnxruntime":
        pytest.skip(f"this example runs engines on the CPU: use --trt-backend onnxruntime (session uses "
                    f"{trt_backend.name})")


@pytest.mark.trt(MNV2)
def test_engine_matches_reference_on_any_input(trt_engine):
    @EXAMPLES
    @given(feeds=engine_inputs(trt_engine, elements=(-4.0, 4.0)))
    def prop(feeds):
        trt_engine.assert_matches_reference(feeds, rtol=1e-4, atol=1e-4, cosine=0.9999)

    prop()


@pytest.mark.xfail(raises=AssertionError, strict=True, reason="planted bug: the stem ReLU6 bites above ~2.5")
@pytest.mark.trt(PLANTED)
def test_planted_bug_is_found_and_shrunk(trt_engine):
    @EXAMPLES
    @given(feeds=engine_inputs(trt_engine, elements=(0.0, 4.0)))
    def prop(feeds):
        trt_engine.assert_matches_reference(feeds, rtol=1e-4, atol=1e-4, reference=MODELS["mobilenet_v2"])

    prop()
