"""Shared fixtures for pytest-trt's own tests: example models, backend availability, the heavy tier."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.interrupts"]

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
HAS_TRT = importlib.util.find_spec("tensorrt") is not None
HAS_ORT = importlib.util.find_spec("onnxruntime") is not None

def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


#: the installed TensorRT-RTX ("1.7.1.116") and its major.minor ("1.7"): tests run on the tox axis 1.4 / 1.7
RTX_VERSION = _dist_version("tensorrt-rtx")
RTX_MM = ".".join(RTX_VERSION.split(".")[:2])

needs_rtx = pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
needs_trt = pytest.mark.skipif(
    not HAS_TRT,
    reason="NVIDIA TensorRT (module tensorrt) is not installed: its PyPI wheels download their libraries from "
    "NVIDIA's own index, unreachable here; the shared code path is tested through tensorrt_rtx",
)
#: The heavy tier (node-id prefixes): the slowest tests, and those needing the extras [test] leaves out (full mlflow,
#: matplotlib, mkdocs). ``pytest tests/`` deselects them; ``PYTEST_TRT_HEAVY=1`` or ``-m heavy`` runs them, as .ci/run's
#: second step does (docs/development.md). A prefix that matches no test fails tests/foundation/test_suite_tiers.py.
HEAVY = (
    "tests/docs/test_snippets.py::test_page_snippets_run",
    "tests/docs/test_site.py",
    "tests/audit/test_fuzz_bundles.py",
    "tests/test_examples_run.py",
    "tests/monitor/test_monitor_digits.py",
    "tests/monitor/test_monitor_spec_cli.py",
    "tests/monitor/test_monitor_prometheus.py",
    "tests/catalog/test_catalog_mlflow.py",
    "tests/catalog/test_catalog_plugin.py::test_session_indexes_golden_metrics_of_passed_and_failed_checks",
    "tests/catalog/test_catalog_plugin.py::test_session_indexes_its_bundles",
    "tests/calibration/test_calibration_assertions.py::test_assert_calibration_three_forms_agree",
    "tests/calibration/test_explicit.py::test_each_method_gives_a_qdq_model_onnxruntime_runs",
    "tests/calibration/test_explicit.py::test_tensorrt_rtx_builds_the_qdq_model_with_int8_layers",
    "tests/calibration/test_progress.py",
    "tests/audit/test_tamper.py::test_every_single_byte_flip_of_a_signed_bundle_is_detected",
    "tests/audit/test_bundle_limits.py",
    "tests/audit/test_killed_bundle_writer.py",
    "tests/audit/test_pytest_hooks.py::test_junit_properties_and_one_bundle_per_engine",
    "tests/test_testing.py::test_lifecycle_sees_a_regression",
    "tests/test_testing.py::test_the_docs_snippet_runs",
    "tests/test_testing.py::test_a_pytest_run_with_the_fake_backend_makes_a_verifiable_bundle",
    "tests/test_fuzz_cli.py::test_fuzz_foreign_databases_are_refused",
    "tests/upgrade/test_localize.py::test_cli_localize_on_the_planted_run",
    "tests/upgrade/test_approval_and_failures.py::test_report_renders_in_headless_chromium",
    "tests/golden/test_golden_hooks.py::test_xdist_updates_and_checks",
    "tests/foundation/test_options.py::test_paths_follow_one_rule_and_the_printed_command_pastes_where_pytest_ran",
    "tests/foundation/test_devices.py::test_each_worker_sees_only_its_device",
    "tests/foundation/test_plugin.py::test_xdist_workers_share_the_cache_and_report_engines",
    "tests/hardening/test_cache_private_umask.py",
    "tests/backends/test_ort_origins_architectures.py::test_every_layer_computes_exactly_its_origins[vit_b_16]",
    "tests/foundation/test_rebuild_determinism.py::test_tensorrt_rtx_rebuilds",
    "tests/upgrade/test_pin_block.py",
    "tests/upgrade/test_localize_qdq.py",
    "tests/upgrade/test_report_quant_errors.py",
    "tests/upgrade/test_report.py::test_pictures_readable_on_a_wide_page",
)


def heavy_tier_selected(config: pytest.Config) -> bool:
    """Whether this run takes the heavy tier: ``PYTEST_TRT_HEAVY=1``, or a ``-m`` expression naming ``heavy``."""
    return os.environ.get("PYTEST_TRT_HEAVY") == "1" or "heavy" in (config.getoption("markexpr", "") or "")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "heavy: slow or extra-needing test, run by PYTEST_TRT_HEAVY=1 or -m heavy")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, heavy = [], []
    for item in items:
        if item.nodeid.startswith(HEAVY):
            item.add_marker(pytest.mark.heavy)
            heavy.append(item)
        else:
            keep.append(item)
    if heavy and not heavy_tier_selected(config):
        config.hook.pytest_deselected(items=heavy)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str:
    return ("heavy tier: selected" if heavy_tier_selected(config) else
            "heavy tier: deselected (PYTEST_TRT_HEAVY=1 or -m heavy runs it; .ci/run does, as its second step)")


needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example ONNX models, written once per session."""
    from examples.models import write_all

    return write_all(tmp_path_factory.mktemp("models"))


def install_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """Put an executable ``nvidia-smi`` running ``script`` (sh) first on PATH, inherited by subprocesses.

    CUDA_VISIBLE_DEVICES is unset and the host probe's memo cleared, so the next probe runs the fake;
    clear it again (``hostprobe.clear()``) after the test.
    """
    import os
    import stat

    from pytest_trt.common import hostprobe

    exe = tmp_path / "bin" / "nvidia-smi"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n" + script)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hostprobe.clear()
    return exe
