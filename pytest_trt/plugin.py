"""pytest hooks of pytest-trt: options, marker, fixtures, report header and summary.

Hooks only construct and delegate; decisions live in importable modules.
Loading this module imports neither tensorrt, onnxruntime nor h5py.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt
from pytest_trt.backends import registry
from pytest_trt.errors import TrtError
from pytest_trt.keys import BUILD_FAILED, ITEM_ENGINES, PROVIDER, PROVIDER_FACTORY, provider_of

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig
    from pytest_trt.engine import Engine
    from pytest_trt.session import EngineProvider

#: hook modules of the golden and audit features (each imports nothing heavy at load)
HOOK_MODULES = (
    "pytest_trt.golden.pytest_hooks",
    "pytest_trt.audit.pytest_hooks",
    "pytest_trt.collect_errors",
    "pytest_trt.devices_hooks",
    "pytest_trt.catalog.pytest_hooks",
)

_WORKER_ROWS = pytest.StashKey[list[dict[str, Any]]]()
_WORKER_ERRORS = pytest.StashKey[list[str]]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    # Registered here rather than listed in ``pytest_plugins``: pytest looks each listed
    # name up among every installed distribution's entry points first, about 4 ms per
    # name on every run (benchmarks/bench_startup.py).  Names as pytest would give them,
    # so ``-p no:pytest_trt.audit.pytest_hooks`` and ``-p pytest_trt.golden.pytest_hooks`` still work.
    import importlib

    for name in HOOK_MODULES:
        if not pluginmanager.is_blocked(name) and pluginmanager.get_plugin(name) is None:
            pluginmanager.register(importlib.import_module(name), name)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trt", "TensorRT engine regression testing (pytest-trt)")
    group.addoption(
        opt.ENGINE_BUILD,
        action="store_true",
        dest="trt_engine_build",
        help="build engines that are not in the cache (default: skip tests whose engine is not cached)",
    )
    group.addoption(
        opt.BACKEND,
        dest="trt_backend",
        default=None,
        choices=opt.BACKEND_CHOICES,
        help=registry.backend_help(),
    )
    group.addoption(
        opt.REBUILD,
        action="store_true",
        dest="trt_rebuild",
        help="ignore engine-cache hits and build again (needs --trt-engine-build)",
    )
    group.addoption(
        opt.CACHE_DIR,
        dest="trt_cache_dir",
        default=None,
        metavar="DIR",
        help=f"engine cache folder (default: {opt.DEFAULT_CACHE_DIR} under the rootdir)",
    )
    parser.addini(opt.INI_ENGINE_BUILD, "build missing engines as with --trt-engine-build", type="bool", default=False)
    parser.addini(opt.INI_BACKEND, registry.ini_help(), default="auto")
    parser.addini(opt.INI_CACHE_DIR, "engine cache folder, relative to the rootdir", default=opt.DEFAULT_CACHE_DIR)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", opt.MARKER_HELP)
    options = opt.Options.from_pytest(config)
    _warn_if_rootdir_moved(config)
    if options.rebuild and not options.engine_build:
        raise pytest.UsageError(f"{opt.REBUILD} rebuilds engines and so needs {opt.ENGINE_BUILD} too")
    # The provider (backend choice, cache, session module) is made on first use: a run
    # without trt tests never imports it (benchmarks/bench_startup.py).
    config.stash[PROVIDER_FACTORY] = lambda: _make_provider(config, options)


def _make_provider(config: pytest.Config, options: opt.Options) -> EngineProvider:
    from pytest_trt.backends.registry import choose_backend
    from pytest_trt.session import EngineProvider

    try:
        backend, why = choose_backend(options.backend)
    except TrtError as exc:
        backend, why = "none", exc.message

    def progress(text: str) -> None:
        # looked up per message: the terminal reporter registers after this hook runs;
        # builds happen inside fixtures, where output is captured unless capture is suspended
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or config.get_verbosity() < 0:
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            reporter.write_line(f"pytest-trt: {text}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"pytest-trt: {text}")

    return EngineProvider(
        backend,
        why=why,
        cache_dir=options.cache_dir,
        build=options.engine_build,
        rebuild=options.rebuild,
        build_flag=opt.ENGINE_BUILD,
        on_progress=progress,
    )


def _warn_if_rootdir_moved(config: pytest.Config) -> None:
    args = config.invocation_params.args
    if config.inipath is not None or not any(a in opt.PATH_OPTIONS for a in args):
        return  # nothing to check: skip the import (start-up cost of a plain run)
    from pytest_trt.invocation import rootdir_moved_by, rootdir_warning

    pairs = rootdir_moved_by(
        list(config.invocation_params.args), path_options=opt.PATH_OPTIONS, inipath=config.inipath,
        invocation_dir=config.invocation_params.dir,
    )
    if pairs:
        config.issue_config_time_warning(pytest.PytestConfigWarning(rootdir_warning(pairs, config.rootpath)), 2)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from pytest_trt.report import header_lines

    return header_lines(provider_of(config))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [(item, mark) for item in items for mark in item.iter_markers(opt.MARKER)]
    if not marked:  # a run without trt tests loads none of pytest-trt's modules
        return
    from pytest_trt.config import BuildConfig

    problems = []
    for item, mark in marked:
        if len(mark.args) != 1 or mark.kwargs or not isinstance(mark.args[0], BuildConfig):
            problems.append(
                f"{item.nodeid}: @pytest.mark.trt takes exactly one BuildConfig, got "
                f"args={mark.args!r} kwargs={mark.kwargs!r}"
            )
    if problems:
        raise pytest.UsageError("invalid trt markers:\n  " + "\n  ".join(problems))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    from pytest_trt.current import begin_test, end_test
    from pytest_trt.errors import EngineNotRunnable

    token = begin_test(item.stash.setdefault(ITEM_ENGINES, []))
    try:
        return (yield)
    except EngineNotRunnable as exc:
        # The engine was built but this machine cannot execute it (no GPU, unsupported
        # compute capability): the test cannot run here, which is a skip, not a failure.
        # Nothing substitutes another backend's outputs.
        skip, failure = exc.message, None
    except TrtError as exc:
        # A user-fixable problem (missing golden, bad inputs, ...): its message says what
        # to do; the plugin's internal frames would only hide it.
        skip, failure = None, str(exc)
    finally:
        end_test(token)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    from pytest_trt.skipping import not_runnable_message

    pytest.skip(not_runnable_message(skip or "engine not runnable here", ""))


def _provide(request: pytest.FixtureRequest, config: BuildConfig) -> Engine:
    """Get an engine for a fixture: skip when not built, fail with a plain message on user errors."""
    from pytest_trt.errors import EngineNotBuilt

    provider = provider_of(request.config)
    if provider.backend_name == "none":
        pytest.skip(provider.why)
    try:
        engine = provider.get(config)
    except EngineNotBuilt as exc:
        skip: str | None = exc.message
        failure: str | None = None
    except TrtError as exc:
        skip, failure = None, str(exc)
        request.node.stash[BUILD_FAILED] = exc  # read by the audit hooks (a "could not build" note)
    else:
        skip = failure = None
    # outside the except blocks, so the report shows the message, not a chained traceback
    if skip is not None:
        pytest.skip(skip)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    used = request.node.stash.setdefault(ITEM_ENGINES, [])
    if engine not in used:
        used.append(engine)
    return engine


@pytest.fixture(scope="session")
def trt_backend(pytestconfig: pytest.Config) -> Any:
    """The session's backend (``.name``, ``.version()``), e.g. to skip examples another backend cannot run."""
    provider = provider_of(pytestconfig)
    if provider.backend_name == "none":
        pytest.skip(provider.why)
    try:
        return provider.backend
    except TrtError as exc:
        message = exc.message
    pytest.skip(message)


@pytest.fixture
def trt_build(request: pytest.FixtureRequest) -> Callable[[BuildConfig], Engine]:
    """Factory: ``trt_build(config) -> Engine``, cached per key for the session."""
    from pytest_trt.config import BuildConfig

    def build(config: BuildConfig) -> Engine:
        if not isinstance(config, BuildConfig):
            raise TypeError(f"trt_build takes a BuildConfig, got {type(config).__name__}")
        return _provide(request, config)

    return build


@pytest.fixture
def trt_engine(request: pytest.FixtureRequest) -> Engine:
    """The engine of the test's ``@pytest.mark.trt(config)`` marker."""
    mark = request.node.get_closest_marker(opt.MARKER)
    if mark is None:
        pytest.fail(
            f"{request.node.nodeid}: trt_engine needs @pytest.mark.trt(BuildConfig(...)) on the test", pytrace=False
        )
    return _provide(request, mark.args[0])


@pytest.fixture
def trt_reference(trt_engine: Engine) -> Any:
    """The test's model run by ONNX Runtime with every optimization off: the plain ONNX semantics."""
    try:
        return trt_engine.reference()
    except TrtError as exc:
        pytest.skip(exc.message)


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    provider = config.stash.get(PROVIDER, None)
    if provider is not None:
        provider.flush()  # every cache entry of the session on disk before pytest exits
    if hasattr(config, "workeroutput"):  # pytest-xdist worker: send the engine table to the controller
        from pytest_trt.report import summary_rows

        config.workeroutput["trt_engines"] = summary_rows(provider) if provider is not None else []
        config.workeroutput["trt_cache_errors"] = provider.write_errors if provider is not None else []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    output = getattr(node, "workeroutput", {})
    node.config.stash.setdefault(_WORKER_ROWS, []).extend(output.get("trt_engines", []))
    node.config.stash.setdefault(_WORKER_ERRORS, []).extend(output.get("trt_cache_errors", []))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    provider = config.stash.get(PROVIDER, None)
    rows = config.stash.get(_WORKER_ROWS, [])
    errors: list[str] = list(provider.write_errors) if provider is not None else []
    worker_errors: list[str] = config.stash.get(_WORKER_ERRORS, [])
    errors.extend(worker_errors)
    if provider is None and not rows and not errors:
        return  # no trt test ran in this process nor in a worker
    from pytest_trt.report import engine_table, summary_rows

    rows = (summary_rows(provider) if provider is not None else []) + rows
    if rows:
        terminalreporter.section("pytest-trt engines")
        for line in engine_table(rows):
            terminalreporter.write_line(line)
    for error in errors:
        terminalreporter.write_line(f"WARNING {error}", yellow=True)
