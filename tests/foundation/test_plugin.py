"""The pytest layer, run for real in subprocesses through pytester."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import RTX_VERSION, needs_rtx

pytestmark = needs_rtx

TEST_MODULE = """
import pytest
from pytest_trt import BuildConfig, Profile, assert_fused, assert_no_fusion

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.backend == "tensorrt-rtx"
    assert "[ONNX Layer: relu1]" in trt_engine.result.log_text()
"""


@pytest.fixture
def suite(pytester, models):
    pytester.makepyfile(test_model=TEST_MODULE.format(onnx=str(models["conv_bn_relu"])))
    return pytester


def test_engine_build_builds_and_summary_lists_the_engine(suite):
    result = suite.runpytest_subprocess("--trt-engine-build", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-trt: backend tensorrt-rtx * (auto: first importable of tensorrt, tensorrt-rtx, onnxruntime (tensorrt not installed))",
            "pytest-trt: device *; cache *.trt_cache; build missing engines",
            "pytest-trt: building engine 'cbr' with tensorrt-rtx * ...",
            "pytest-trt: built engine 'cbr' in * s",
            "*pytest-trt engines*",
            "engine*config hash*status*build s*layers*backend*",
            f"cbr v1.0 *built *tensorrt-rtx {RTX_VERSION}*",
        ]
    )
    # the next session takes the engine from the cache
    again = suite.runpytest_subprocess("-p", "no:cacheprovider")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["cbr v1.0 *cached*"])


def test_without_engine_build_the_test_skips_naming_the_flag(suite):
    result = suite.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*engine 'cbr' (tensorrt-rtx) is not in the cache *; run pytest with --trt-engine-build to build it*"]
    )


def test_cache_dir_option_and_ini(pytester, models, tmp_path):
    # where the cache goes is plumbing: the fake backend (pytest_trt.testing) stands in for a build
    pytester.makepyfile(test_model=TEST_MODULE.format(onnx=str(models["conv_bn_relu"])).replace("tensorrt-rtx", "fake")
                        .replace('assert "[ONNX Layer: relu1]"', "#"))
    pytester.makeini("[pytest]\ntrt_cache_dir = engines\n")
    fake = ("-p", "pytest_trt.testing.register_fake", "--trt-backend", "fake", "--trt-engine-build", "-p",
            "no:cacheprovider")
    pytester.runpytest_subprocess(*fake).assert_outcomes(passed=1)
    assert len(list((pytester.path / "engines").glob("*/*/entry.json"))) == 1  # the ini's folder, under the rootdir
    other = tmp_path / "elsewhere"
    pytester.runpytest_subprocess(*fake, f"--trt-cache-dir={other}").assert_outcomes(passed=1)
    assert len(list(other.glob("*/*/entry.json"))) == 1


def test_rebuild_needs_engine_build(suite):
    result = suite.runpytest_subprocess("--trt-rebuild", "-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*--trt-rebuild rebuilds engines and so needs --trt-engine-build too*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_marker_arguments_are_a_usage_error(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.trt("model.onnx")
        def test_x(trt_engine):
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_bad_marker_arguments_are_a_usage_error.py::test_x: @pytest.mark.trt takes exactly one BuildConfig*"]
    )


def test_trt_engine_without_marker_fails_clearly(pytester):
    pytester.makepyfile("def test_x(trt_engine):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*trt_engine needs @pytest.mark.trt(BuildConfig(...)) on the test*"])


def test_user_errors_fail_without_an_internal_traceback(pytester, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07junk")
    pytester.makepyfile(f"""
        import pytest
        from pytest_trt import BuildConfig
        @pytest.mark.trt(BuildConfig(name="bad", onnx={str(bad)!r}))
        def test_x(trt_engine):
            pass
        def test_fp16(trt_build):
            trt_build(BuildConfig(name="half", onnx={str(bad)!r}, precision="fp16"))
    """)
    result = pytester.runpytest_subprocess("--trt-engine-build", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=1)  # a fixture failing is a setup error
    result.stdout.fnmatch_lines(
        [
            f"*BuildConfig 'bad': tensorrt-rtx {RTX_VERSION} could not parse *bad.onnx*",
            "*Full build log: *failed/bad-*/build.log*",
            "*BuildConfig 'half': precision='fp16': TensorRT-RTX * has no usable FP16 builder flag*",
        ]
    )
    out = result.stdout.str()
    assert "pytest_trt/backends" not in out and "During handling" not in out


def test_module_assertion_with_two_engines_needs_engine_keyword(suite, models):
    suite.makepyfile(
        test_two=f"""
        import pytest
        from pytest_trt import BuildConfig, Profile, assert_no_fusion
        from pytest_trt.errors import AssertionContextError
        P = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
        def test_two(trt_build):
            a = trt_build(BuildConfig(name="a", onnx={str(models["conv_bn_relu"])!r}, profiles=P))
            b = trt_build(BuildConfig(name="b", onnx={str(models["conv_bn_relu"])!r}, profiles=P, builder_optimization_level=1))
            with pytest.raises(AssertionContextError, match="this test uses 2 engines .*pass engine="):
                assert_no_fusion("conv1", "relu1")
    """
    )
    suite.runpytest_subprocess("--trt-engine-build", "-p", "no:cacheprovider", "test_two.py").assert_outcomes(passed=1)


def test_xdist_workers_share_the_cache_and_report_engines(suite):
    pytest.importorskip("xdist")
    suite.makepyfile(
        test_more="""
        from test_model import CFG
        import pytest
        @pytest.mark.parametrize("i", range(4))
        @pytest.mark.trt(CFG)
        def test_same_engine(trt_engine, i):
            assert trt_engine.result.engine
    """
    )
    result = suite.runpytest_subprocess("--trt-engine-build", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*pytest-trt engines*", "cbr v1.0 *built*"])
    assert result.stdout.str().count("cbr v1.0 ") == 1


def test_loading_the_plugin_imports_no_heavy_library():
    code = (
        "import sys, pytest_trt, pytest_trt.plugin, pytest_trt.pytest_plugin.session; "
        "print(sorted(m for m in ('tensorrt', 'tensorrt_rtx', 'onnxruntime', 'h5py', 'numpy', 'onnx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_running_an_rtx_engine_without_a_supported_gpu_skips_with_the_reason(suite):
    from pytest_trt.backends.tensorrt import TensorRTBackend

    if TensorRTBackend("tensorrt_rtx").not_runnable_reason() is None:
        pytest.skip("this machine has a GPU that TensorRT-RTX supports")
    suite.makepyfile(test_run="""
        import numpy as np
        import pytest
        from test_model import CFG
        @pytest.mark.trt(CFG)
        def test_run(trt_engine):
            trt_engine.run({"input": np.zeros((1, 3, 16, 16), np.float32)})
            raise AssertionError("unreachable: the engine cannot run here")
    """)
    result = suite.runpytest_subprocess("--trt-engine-build", "-rs", "-p", "no:cacheprovider", "test_run.py")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cannot run tensorrt-rtx engine 'cbr' here: *engines need an NVIDIA GPU to run*"])


@pytest.mark.parametrize(
    ("hidden", "header"),
    [
        (("tensorrt",), "pytest-trt: backend tensorrt-rtx * (auto: first importable of tensorrt, tensorrt-rtx, onnxruntime (tensorrt not installed))"),
        (("tensorrt", "tensorrt_rtx"), "pytest-trt: backend onnxruntime * (auto: first importable of tensorrt, tensorrt-rtx, onnxruntime (tensorrt, tensorrt_rtx not installed))"),
        (("tensorrt", "tensorrt_rtx", "onnxruntime"), "pytest-trt: no backend (no backend is installed: install one of tensorrt, tensorrt-rtx or onnxruntime*"),
    ],
)
def test_auto_backend_falls_back_and_says_why(pytester, hidden, header):
    # a machine without those modules: sys.modules[name] = None makes them unimportable and unfindable
    pytester.makeconftest("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in hidden))
    pytester.makepyfile("def test_ok(trt_backend):\n    assert trt_backend.name\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.stdout.fnmatch_lines([header])
    if len(hidden) == 3:
        result.assert_outcomes(skipped=1)
    else:
        result.assert_outcomes(passed=1)
