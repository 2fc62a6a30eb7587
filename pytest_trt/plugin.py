"""The ``trt`` pytest plugin (entry point): options, marker, fixtures; the rest is :class:`TrtSession`.

``pytest_configure`` registers one :class:`~pytest_trt.pytest_plugin.session.TrtSession`,
which owns the run's state and hooks.  Fixtures here only ask the session.
Loading this module imports neither tensorrt, onnxruntime nor h5py, and a run
without trt tests never makes the engine provider (benchmarks/bench_startup.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.engine import Engine
    from pytest_trt.golden.workflow import GoldenCheck
    from pytest_trt.pytest_plugin.session import TrtSession


#: config.stash: the folders :func:`pytest_ignore_collect` skips, as pytest names the paths it collects
EVIDENCE_FOLDERS = pytest.StashKey[frozenset[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    opt.add_to_pytest(parser)
    from pytest_trt.compare.thresholds import Thresholds, threshold_names

    defaults = Thresholds()  # the golden threshold family: trt_golden_<field> of Thresholds
    for name in threshold_names():
        parser.addini(f"{opt.THRESHOLD_INI_PREFIX}{name}", type="string", default=str(getattr(defaults, name)),
                      help=f"default golden threshold {name} ('none' switches it off).")


@pytest.hookimpl(tryfirst=True)  # before the first conftest: configs built there resolve against the rootdir too
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    from pytest_trt.common import relpaths

    relpaths.push_base(early_config.rootpath)
    early_config.add_cleanup(relpaths.pop_base)


@pytest.hookimpl(tryfirst=True)  # first: an xdist worker is pinned to its GPU before anything loads CUDA
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", opt.MARKER_HELP)
    _warn_if_rootdir_moved(config)
    from pytest_trt.pytest_plugin.session import TrtSession

    session = TrtSession.register(config)
    folders = (session.options.cache_dir, opt.path(config, opt.BUNDLE_DIR_OPT))
    config.stash[EVIDENCE_FOLDERS] = frozenset(folder for folder in folders if folder is not None)
    if opt.flag_value(config, opt.REBUILD_OPT):  # a rebuild is compared with the entry it replaces
        from pytest_trt.pytest_plugin.determinism import register

        register(config)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """pytest does not walk the engine cache or the bundle folder for tests: they grow with every build for as long
    as the evidence is kept (100,000 bundles are 400,000 files, each listed and matched at every collection, in each
    xdist worker).  pytest still collects a path given on its command line, and never asks about the rootdir."""
    return True if collection_path in config.stash.get(EVIDENCE_FOLDERS, frozenset()) else None


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    """An xdist worker's test report crosses to the controller with its properties and sections as one string."""
    data = yield
    if data is not None and hasattr(config, "workerinput") and data.get("$report_type") == "TestReport":
        from pytest_trt.pytest_plugin.channel import pack_report

        pack_report(data)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_report_from_serializable(config: pytest.Config, data: dict[str, Any]) -> Any:
    """The controller's side: what a worker packed is put back before pytest makes the report."""
    from pytest_trt.pytest_plugin.channel import REPORT_KEY, unpack_report

    if REPORT_KEY in data:
        unpack_report(data)
    return (yield)


def _warn_if_rootdir_moved(config: pytest.Config) -> None:
    args = config.invocation_params.args
    if config.inipath is not None or not any(a in opt.PATH_OPTIONS for a in args):
        return  # nothing to check: skip the import (start-up cost of a plain run)
    from pytest_trt.pytest_plugin.invocation import rootdir_moved_by, rootdir_warning

    pairs = rootdir_moved_by(
        list(args), path_options=opt.PATH_OPTIONS, inipath=config.inipath, invocation_dir=config.invocation_params.dir,
    )
    if pairs:
        config.issue_config_time_warning(pytest.PytestConfigWarning(rootdir_warning(pairs, config.rootpath)), 2)


def _session(config: pytest.Config) -> TrtSession:
    from pytest_trt.pytest_plugin.session import session_of

    return session_of(config)


@pytest.fixture(scope="session")
def trt_backend(pytestconfig: pytest.Config) -> Any:
    """The session's backend (``.name``, ``.version()``), e.g. to skip examples another backend cannot run."""
    return _session(pytestconfig).backend()


@pytest.fixture
def trt_build(request: pytest.FixtureRequest) -> Callable[[BuildConfig], Engine]:
    """Factory: ``trt_build(config) -> Engine``, cached per key for the session."""
    from pytest_trt.config import BuildConfig

    session = _session(request.config)

    def build(config: BuildConfig) -> Engine:
        if not isinstance(config, BuildConfig):
            raise TypeError(f"trt_build takes a BuildConfig, got {type(config).__name__}")
        return session.engine(request, config)

    return build


@pytest.fixture
def trt_engine(request: pytest.FixtureRequest) -> Engine:
    """The engine of the test's ``@pytest.mark.trt(config)`` marker."""
    mark = request.node.get_closest_marker(opt.MARKER)
    if mark is None:
        pytest.fail(
            f"{request.node.nodeid}: trt_engine needs @pytest.mark.trt(BuildConfig(...)) on the test", pytrace=False
        )
    return _session(request.config).engine(request, mark.args[0])


@pytest.fixture
def trt_reference(trt_engine: Engine) -> Any:
    """The test's model run by ONNX Runtime with every optimization off: the plain ONNX semantics."""
    from pytest_trt.errors import TrtError
    from pytest_trt.pytest_plugin.outcomes import raise_outcome

    try:
        return trt_engine.reference()
    except TrtError as exc:
        error = exc
    raise_outcome(error, optional=True)


@pytest.fixture
def trt_golden(request: pytest.FixtureRequest) -> GoldenCheck:
    """Golden snapshot check of the test's engine: ``trt_golden.check(trt_engine, l2_delta=0.05)``."""
    return _session(request.config).golden_check(request)


@pytest.fixture(scope="session")
def trt_device(pytestconfig: pytest.Config) -> str | None:
    """The GPU this process is pinned to (its id before pinning), or None when not pinned."""
    return _session(pytestconfig).device()
