"""A session lets go of a cached engine's bytes once the tests that use it in a row are done (real pytest runs)."""

from __future__ import annotations

import time

from tests.conftest import needs_rtx

SUITE = """
import os
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.pytest_plugin.session import session_of

PROFILES = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
A = BuildConfig(name="a", version="1.0", onnx={onnx!r}, profiles=PROFILES)
B = BuildConfig(name="b", version="1.0", onnx={onnx!r}, profiles=PROFILES, builder_optimization_level=2)
LAZY = os.environ.get("EXPECT_RELEASED") == "1"

def _held(request, config):
    engine = next(e for e in session_of(request.config).provider.engines if e.config == config)
    return "engine" in engine.result.__dict__

@pytest.mark.trt(A)
def test_1_a(trt_engine):
    assert trt_engine.result.engine

@pytest.mark.trt(A)
def test_2_a(trt_engine, request):
    assert _held(request, A)  # the test before used A too: kept

@pytest.mark.trt(B)
def test_3_b(trt_engine, request):
    assert trt_engine.result.engine
    assert _held(request, A) is not LAZY  # a stamped cache hit's bytes go once A's run of tests is done

@pytest.mark.trt(A)
def test_4_a(trt_engine):
    assert trt_engine.result.engine == (trt_engine.artifact_dir / "engine.plan").read_bytes()  # read again
"""


@needs_rtx
def test_a_cached_engine_is_let_go_after_its_tests_and_read_again_when_used_later(pytester, models, monkeypatch):
    pytester.makepyfile(test_release=SUITE.format(onnx=str(models["conv_bn_relu"])))
    args = ("-p", "no:cacheprovider", "--trt-backend", "tensorrt-rtx", "--trt-cache-dir", str(pytester.path / "c"))
    monkeypatch.setenv("EXPECT_RELEASED", "0")
    pytester.runpytest_subprocess(*args, "--trt-engine-build").assert_outcomes(passed=4)  # built: kept
    time.sleep(1.1)  # a file is stamped only once its times are a second old (filehash.STAMP_SETTLE_NS)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=4)  # first hits: verified, stamped, read
    monkeypatch.setenv("EXPECT_RELEASED", "1")
    result = pytester.runpytest_subprocess(*args)  # stamped hits: read on use, let go after their tests
    result.assert_outcomes(passed=4)

