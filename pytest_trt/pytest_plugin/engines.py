"""Engines for the fixtures: the session's provider, made on first use, and what a fixture does with its answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt
from pytest_trt.errors import TrtError

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.engine import Engine
    from pytest_trt.engines.provider import EngineProvider
    from pytest_trt.pytest_plugin.record import ItemRecord


def make_provider(config: pytest.Config, options: opt.Options) -> EngineProvider:
    """The engine provider of the session: backend chosen now (or "none" with the reason), cache, build switches."""
    from pytest_trt.backends.registry import choose_backend
    from pytest_trt.engines.provider import EngineProvider

    try:
        backend, why = choose_backend(options.backend)
    except TrtError as exc:
        backend, why = "none", exc.message

    def progress(text: str) -> None:
        # looked up per message: the terminal reporter registers after configure; builds happen
        # inside fixtures, where output is captured unless capture is suspended
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or config.get_verbosity() < 0:
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            reporter.write_line(f"pytest-trt: {text}")
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"pytest-trt: {text}")

    return EngineProvider(backend, why=why, cache_dir=options.cache_dir, build=options.engine_build,
                          rebuild=options.rebuild, build_flag=opt.ENGINE_BUILD, on_progress=progress)


def engine_for(provider: EngineProvider, record: ItemRecord, config: BuildConfig) -> Engine:
    """The engine of ``config`` for one test, listed in ``record``; a TrtError is the test's outcome
    (:func:`~pytest_trt.pytest_plugin.outcomes.raise_outcome`), and a build failure is kept in ``record``."""
    from pytest_trt.errors import EngineNotBuilt
    from pytest_trt.pytest_plugin.outcomes import raise_outcome

    if provider.backend_name == "none":
        pytest.skip(provider.why)
    try:
        engine = provider.get(config)
    except TrtError as exc:
        error = exc
        if not isinstance(exc, EngineNotBuilt):
            record.build_failure = exc  # a "could not build" note for the upgrade report
    else:
        record.use(engine)
        return engine
    raise_outcome(error)


def backend_of(provider: EngineProvider) -> Any:
    """The session's backend object, or a skip saying why there is none."""
    from pytest_trt.pytest_plugin.outcomes import raise_outcome

    if provider.backend_name == "none":
        pytest.skip(provider.why)
    try:
        return provider.backend
    except TrtError as exc:
        error = exc
    raise_outcome(error, optional=True)
