"""A pytest run whose tests use no trt marker loads only pytest-trt's light hook modules.

The cost itself is measured by ``benchmarks/bench_startup.py`` (target: <= 20 ms
added); this test pins what that number depends on: which modules load.
"""

from __future__ import annotations

import pytest

#: never loaded by a run without trt tests (the buildlog parser, configs, cache, bundles, numpy ...)
NOT_LOADED = ("pytest_trt.buildlog", "pytest_trt.config", "pytest_trt.engines.engine", "pytest_trt.engines.assertions",
              "pytest_trt.audit.bundle", "pytest_trt.audit.archive", "pytest_trt.audit.pins",
              "pytest_trt.golden.store", "tarfile", "numpy", "h5py", "onnx", "onnxruntime", "tensorrt_rtx",
              # the engine provider and the hook modules' state are made on first use
              "pytest_trt.engines.provider", "pytest_trt.engines.cache", "pytest_trt.artifact",
              # the backend table (options read its names) loads; no backend module, no request
              "pytest_trt.backends.base", "pytest_trt.backends.request", "pytest_trt.backends.tensorrt",
              "pytest_trt.backends.onnxruntime",
              "pytest_trt.audit.recorder", "pytest_trt.catalog.archiving", "pytest_trt.pytest_plugin.devices",
              "pytest_trt.pytest_plugin.invocation", "pytest_trt.pytest_plugin.report", "pytest_trt.calibration", "pytest_trt.golden.workflow",
              # what only an option, an engine or pytest-xdist asks for
              "pytest_trt.pytest_plugin.audit", "pytest_trt.pytest_plugin.archive", "pytest_trt.pytest_plugin.devices",
              "pytest_trt.pytest_plugin.channel", "pytest_trt.pytest_plugin.terminal", "pytest_trt.golden.provenance",
              "pytest_trt.pytest_plugin.golden", "pytest_trt.pytest_plugin.record", "pytest_trt.pytest_plugin.engines",
              # the helpers for tests (fake backend, golden lifecycle): only what a test imports
              "pytest_trt.testing")
#: everything a plain ``pytest -q`` run may load of pytest-trt: the hook modules and what their options need
ALLOWED = {"pytest_trt", "pytest_trt.errors", "pytest_trt.options", "pytest_trt.plugin", "pytest_trt.pytest_plugin",
           "pytest_trt.common", "pytest_trt.common.package", "pytest_trt.backends", "pytest_trt.backends.registry",
           "pytest_trt.pytest_plugin.session",
           "pytest_trt.compare", "pytest_trt.compare.thresholds", "pytest_trt.pytest_plugin.collect_errors", "pytest_trt.engines",
           "pytest_trt.engines.current", "pytest_trt.common.relpaths"}


def test_plain_run_loads_no_heavy_module(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(f"""
        import sys

        def test_plain():
            loaded = sorted(m for m in {NOT_LOADED!r} if m in sys.modules)
            assert loaded == [], loaded
            assert "pytest_trt.plugin" in sys.modules  # the plugin did load
            extra = sorted(m for m in sys.modules if m.startswith("pytest_trt.") and m not in {sorted(ALLOWED)!r})
            assert extra == [], extra
    """)
    pytester.makeconftest("""
        import json, sys

        def pytest_unconfigure(config):  # after the report and summary hooks: what the whole run loaded
            names = [m for m in sys.modules if m.startswith("pytest_trt.")]
            with open("loaded.json", "w") as f:
                json.dump(names, f)
    """)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=1)
    import json

    at_end = set(json.loads((pytester.path / "loaded.json").read_text()))
    assert sorted(at_end - ALLOWED) == []
    assert sorted(m for m in NOT_LOADED if m in at_end) == []


def test_plain_run_with_header_still_names_the_backend(pytester: pytest.Pytester) -> None:
    """The header makes the provider on demand: a run that shows it still says which backend it chose."""
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    result.stdout.fnmatch_lines(["pytest-trt: *backend*", "*1 passed*"])
    assert "pytest-trt engines" not in result.stdout.str()  # no trt test: no engine table


def test_public_names_still_import_lazily() -> None:
    import pytest_trt

    assert pytest_trt.BuildConfig.__module__ == "pytest_trt.config"
    assert callable(pytest_trt.assert_fused) and pytest_trt.Engine.__name__ == "Engine"
    assert set(pytest_trt.__all__) <= set(dir(pytest_trt)) | set(pytest_trt._LAZY)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_trt.nope  # noqa: B018
