"""pytest hooks of the audit archive: ``--trt-catalog``, ``--trt-mlflow-uri``, ``--trt-mlflow-register``.

Registered by ``pytest_trt.plugin`` (``HOOK_MODULES``).  At the end of the
session (on the xdist controller, once every worker's bundles are final) the
bundles the session wrote are indexed and pushed by
:mod:`pytest_trt.catalog.session`; the terminal summary says what happened.
Loading this module imports neither sqlite-heavy code nor mlflow.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt

if TYPE_CHECKING:
    from pytest_trt.catalog.session import ArchiveOutcome, ArchiveSettings

SUMMARY = "pytest-trt audit archive"
#: (MLflow URI, register) of a session that archives its bundles; settings are made when bundles exist
_SETTINGS: pytest.StashKey[tuple[str | None, bool]] = pytest.StashKey()
_OUTCOME: pytest.StashKey[ArchiveOutcome] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trt")
    group.addoption(opt.CATALOG, action="store_true", dest="trt_catalog",
                    help="index every bundle the session writes into <bundle dir>/catalog.sqlite")
    group.addoption(opt.MLFLOW_URI, dest="trt_mlflow_uri", default=None, metavar="URI",
                    help="also log each bundle to this MLflow tracking server (implies --trt-catalog)")
    group.addoption(opt.MLFLOW_REGISTER, action="store_true", dest="trt_mlflow_register",
                    help="also register each engine as an MLflow model version (needs --trt-mlflow-uri)")
    parser.addini(opt.INI_CATALOG, "index written bundles as with --trt-catalog", type="bool", default=False)
    parser.addini(opt.INI_MLFLOW_URI, "MLflow tracking URI bundles are logged to", default="")
    parser.addini(opt.INI_MLFLOW_REGISTER, "register engines as MLflow model versions", type="bool", default=False)


@pytest.hookimpl(trylast=True)  # after the audit layer's configure
def pytest_configure(config: pytest.Config) -> None:
    uri = config.getoption("trt_mlflow_uri") or config.getini(opt.INI_MLFLOW_URI) or None
    register = bool(config.getoption("trt_mlflow_register")) or bool(config.getini(opt.INI_MLFLOW_REGISTER))
    on = bool(config.getoption("trt_catalog")) or bool(config.getini(opt.INI_CATALOG)) or uri is not None
    if register and uri is None:
        raise pytest.UsageError(f"{opt.MLFLOW_REGISTER} registers engines in MLflow and so needs {opt.MLFLOW_URI}")
    if uri is not None and importlib.util.find_spec("mlflow") is None:
        raise pytest.UsageError(f"{opt.MLFLOW_URI} needs mlflow, which is not installed: "
                                "pip install 'pytest-trt[mlflow]'")
    if on:
        config.stash[_SETTINGS] = (uri, register)


def _archive_settings(config: pytest.Config) -> ArchiveSettings | None:
    from pytest_trt.audit.pytest_hooks import recorder_of

    given = config.stash.get(_SETTINGS, None)
    recorder = recorder_of(config) if given is not None else None
    if given is None or recorder is None:
        return None
    from pytest_trt.catalog import DEFAULT_DB_NAME
    from pytest_trt.catalog.session import ArchiveSettings

    uri, register = given
    return ArchiveSettings(db=Path(recorder.settings.bundle_dir) / DEFAULT_DB_NAME, mlflow_uri=uri, register=register)


@pytest.hookimpl(trylast=True)  # after the audit layer bundled the session's remaining engines
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if _SETTINGS not in config.stash or hasattr(config, "workerinput"):  # workers' bundles reach the controller
        return
    from pytest_trt.audit.pytest_hooks import session_bundles

    paths = [Path(row["path"]) for row in session_bundles(config)]
    settings = _archive_settings(config) if paths else None
    if settings is not None:
        from pytest_trt.catalog.session import archive_bundles

        config.stash[_OUTCOME] = archive_bundles(paths, settings)


@pytest.hookimpl(trylast=True)  # after the audit layer's list of bundles
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    outcome = config.stash.get(_OUTCOME, None)
    if outcome is None:
        return
    terminalreporter.section(SUMMARY)
    for line in outcome.lines:
        terminalreporter.write_line(line)
    for line in outcome.warnings:
        terminalreporter.write_line(f"WARNING {line}", yellow=True)
