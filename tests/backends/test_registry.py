"""The backend registry is the one place a backend is declared.

"Adding a backend touches the registry, one backend module and its tests": a toy
BackendSpec registered at test time must show up, with no other edit, in the
``--trt-backend`` choices and help, the report header, create_backend's error text,
environment capture, the bundle file name and the upgrade failure note.
Expected values come from the toy row itself and from package metadata, never from
the functions under test.
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_trt.artifact import BuildResult
from pytest_trt.audit.bundle import bundle_name
from pytest_trt.audit.environment import capture_environment
from pytest_trt.backends import registry
from pytest_trt.backends.registry import BackendSpec
from pytest_trt.errors import BackendUnavailable

#: a backend whose "library" is the stdlib ``json`` module and whose "distribution" is pytest's
TOY = BackendSpec(
    name="toy-backend", module="json", distributions=("pytest",), extra="toyextra", slug="toyslug",
    auto_rank=99, factory="tests.backends.test_registry:make_toy", title="a toy backend for the registry test",
)
#: the same row with a library that is not installed
MISSING = BackendSpec(
    name="toy-missing", module="no_such_module_for_pytest_trt", distributions=("no-such-dist-for-pytest-trt",),
    extra="toymissing", slug="tm", auto_rank=98, factory="tests.backends.test_registry:make_toy", title="missing",
)


class ToyBackend:
    def __init__(self, spec: BackendSpec) -> None:
        self.name = spec.name


def make_toy(spec: BackendSpec) -> ToyBackend:
    return ToyBackend(spec)


@pytest.fixture
def toy() -> Iterator[BackendSpec]:
    registry.register(TOY)
    registry.register(MISSING)
    yield TOY
    registry.unregister(TOY.name)
    registry.unregister(MISSING.name)


def test_the_table_holds_the_three_backends_in_auto_order() -> None:
    assert registry.choices() == ("auto", "tensorrt", "tensorrt-rtx", "onnxruntime")
    assert registry.auto_order() == ("tensorrt", "tensorrt-rtx", "onnxruntime")
    assert [(s.module, s.extra, s.slug) for s in registry.specs()] == [
        ("tensorrt", "trt", "trt"), ("tensorrt_rtx", "rtx", "rtx"), ("onnxruntime", "ort", "ort")]


def test_loading_the_table_imports_no_backend_library() -> None:
    import subprocess
    import sys

    code = ("import sys; from pytest_trt.backends import registry; registry.choices(); "
            "registry.installed_version('tensorrt-rtx'); registry.key_versions('onnxruntime'); "
            "print(sorted(m for m in ('tensorrt_rtx', 'onnxruntime', 'onnx', 'pytest_trt.backends.tensorrt', "
            "'pytest_trt.backends.onnxruntime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_versions_come_from_package_metadata() -> None:
    assert registry.installed_version("onnxruntime") == importlib.metadata.version("onnxruntime")
    assert registry.installed_version("tensorrt-rtx") == importlib.metadata.version("tensorrt-rtx")
    versions = registry.key_versions("onnxruntime")
    assert versions["backend"] == versions["onnxruntime"] == importlib.metadata.version("onnxruntime")
    assert versions["onnx"] == importlib.metadata.version("onnx")
    assert versions["numpy"] == importlib.metadata.version("numpy")


def test_the_header_only_version_reader_agrees_with_importlib_metadata_everywhere() -> None:
    # every installed distribution, read by importlib.metadata's full parser as the independent reference
    names = {d.metadata["Name"] for d in importlib.metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20
    assert {n: registry.metadata_version(n) for n in names} == {n: importlib.metadata.version(n) for n in names}


def test_the_version_reader_stops_at_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "toy_pkg-1.2.3.dist-info"
    info.mkdir()
    # CRLF line ends, a lower-case field name, and a description that mentions another version
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\r\nName: toy-pkg\r\nversion: 1.2.3\r\n\r\n"
                                    b"Version: 9.9.9 is what the README talks about\r\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert registry.metadata_version("toy-pkg") == "1.2.3"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-pkg\n\nVersion: 9.9.9 in the description\n")
    assert registry.metadata_version("toy-pkg") == importlib.metadata.version("toy-pkg")  # no header field
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        registry.metadata_version("no-such-distribution-anywhere")


def test_a_registered_backend_is_created_and_named_in_errors(toy: BackendSpec) -> None:
    assert registry.choices()[-2:] == ("toy-missing", "toy-backend")  # ranks 98, 99: after the real ones
    made = registry.create_backend("toy-backend")
    assert type(made).__name__ == "ToyBackend" and made.name == "toy-backend"  # made by the row's factory
    with pytest.raises(BackendUnavailable, match=r"unknown backend 'nope'; choose one of auto, .*toy-backend"):
        registry.create_backend("nope")
    with pytest.raises(BackendUnavailable, match=r"needs the Python module 'no_such_module_for_pytest_trt'.*"
                                                 r"pip install 'pytest-trt\[toymissing\]'"):
        registry.create_backend("toy-missing")
    assert registry.choose_backend("toy-backend") == ("toy-backend", "requested with --trt-backend")


def test_a_registered_backend_reaches_environment_report_and_upgrade_note(toy: BackendSpec) -> None:
    from pytest_trt.audit.failures import _version
    from pytest_trt.pytest_plugin.report import installed_version

    pytest_version = importlib.metadata.version("pytest")  # the toy's "distribution"
    env = capture_environment(backend="toy-backend")
    assert env["backend"] == {"name": "toy-backend", "version": pytest_version, "onnx_parser": None}
    assert env["packages"]["json"] == pytest_version  # listed under its module's name, like tensorrt_rtx
    assert installed_version("toy-backend") == pytest_version
    assert _version("toy-backend") == pytest_version
    assert capture_environment(backend="toy-missing")["backend"]["version"] is None


def test_a_registered_backend_names_its_bundles_with_its_slug(toy: BackendSpec, tmp_path: Path) -> None:
    result = BuildResult(
        backend="toy-backend", engine=b"e", log=(), config={"name": "m", "version": "2"}, effective_config={},
        config_hash="0" * 64, onnx_sha256="1" * 64, durations={}, versions={"backend": "3.4.5"},
        device={"kind": "cpu"}, backend_version="3.4.5",
    )
    assert bundle_name(result).startswith("m-v2-toyslug3.4-")
    assert bundle_name(BuildResult(**{**result.__dict__, "backend": "tensorrt-rtx"})).startswith("m-v2-rtx3.4-")


def test_a_registered_backend_is_a_trt_backend_choice_in_pytest(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin registering the row before pytest-trt loads (``-p``) is all the options need."""
    monkeypatch.setenv("COLUMNS", "250")  # help lines unwrapped
    pytester.makepyfile(toy_backend_plugin=textwrap.dedent("""
        from pytest_trt.backends import registry
        from pytest_trt.backends.registry import BackendSpec

        registry.register(BackendSpec(
            name="toy-backend", module="json", distributions=("pytest",), extra="toyextra", slug="toyslug",
            auto_rank=99, factory="toy_backend_plugin:create", title="toy"))
        """))
    pytester.makepyfile(test_nothing="def test_one():\n    pass\n")
    help_run = pytester.runpytest_subprocess("-p", "toy_backend_plugin", "--help")
    help_run.stdout.fnmatch_lines([
        "*--trt-backend=NAME*backend that builds engines (default: auto = tensorrt, then tensorrt-rtx, then onnxruntime, then "
        "toy-backend)*",
    ])
    help_run.stdout.fnmatch_lines(["*trt_backend (string):*backend: auto, tensorrt, tensorrt-rtx, onnxruntime, toy-*"])
    run = pytester.runpytest_subprocess("-p", "toy_backend_plugin", "--trt-backend", "toy-backend")
    run.stdout.fnmatch_lines([
        f"pytest-trt: backend toy-backend {importlib.metadata.version('pytest')} (requested with --trt-backend)"])
    run.assert_outcomes(passed=1)
    without = pytester.runpytest_subprocess("--trt-backend", "toy-backend")
    without.stderr.fnmatch_lines(["*argument --trt-backend: invalid choice: 'toy-backend'*"])
