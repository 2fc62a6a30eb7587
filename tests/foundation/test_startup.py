"""A pytest run whose tests use no trt marker loads only pytest-trt's light hook modules.

The cost itself is measured by ``benchmarks/bench_startup.py`` (target: <= 20 ms
added); this test pins what that number depends on: which modules load.
"""

from __future__ import annotations

import pytest

#: never loaded by a run without trt tests (the buildlog parser, configs, cache, bundles, numpy ...)
NOT_LOADED = ("pytest_trt.buildlog", "pytest_trt.config", "pytest_trt.engine", "pytest_trt.assertions",
              "pytest_trt.audit.bundle", "pytest_trt.audit.archive", "pytest_trt.audit.pins",
              "pytest_trt.golden.store", "tarfile", "numpy", "h5py", "onnx", "onnxruntime", "tensorrt_rtx")


def test_plain_run_loads_no_heavy_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(f"""
        import sys

        def test_plain():
            loaded = sorted(m for m in {NOT_LOADED!r} if m in sys.modules)
            assert loaded == [], loaded
            assert "pytest_trt.plugin" in sys.modules  # the plugin did load
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)


def test_public_names_still_import_lazily() -> None:
    import pytest_trt

    assert pytest_trt.BuildConfig.__module__ == "pytest_trt.config"
    assert callable(pytest_trt.assert_fused) and pytest_trt.Engine.__name__ == "Engine"
    assert set(pytest_trt.__all__) <= set(dir(pytest_trt)) | set(pytest_trt._LAZY)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_trt.nope  # noqa: B018
