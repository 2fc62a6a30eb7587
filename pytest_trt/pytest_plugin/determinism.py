"""Rebuild determinism: with ``--trt-rebuild``, each engine rebuilt is compared with the cache entry it replaced.

Registered by ``pytest_trt.plugin`` only when ``--trt-rebuild`` is given, so a plain run imports nothing of it.
The engine cache keeps the entry a rebuild replaced (``<cache>/replaced/<key>``,
:meth:`~pytest_trt.engines.cache.EngineCache.store`); after each test's call this plugin waits for the new
entry to be written, compares the two engine sha256s and, when they differ, the two build records with tactics
unmasked. A difference is a report section and a terminal summary line (carried from pytest-xdist workers);
under ini ``trt_require_deterministic_build = true`` the test fails and the replaced entry is put back.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt

if TYPE_CHECKING:
    from pytest_trt.engines.cache import EngineCache
    from pytest_trt.engines.engine import Engine

PLUGIN_NAME = "trt-rebuild-check"
#: config.workeroutput key: a worker's messages, read by the controller
WORKER_KEY = "trt_rebuild_messages"
SECTION = "trt rebuild"


def register(config: pytest.Config) -> None:
    """Register the check for this run (``--trt-rebuild`` only)."""
    config.pluginmanager.register(RebuildCheck(config), PLUGIN_NAME)


def compare_rebuild(cache: EngineCache, key: str, engine: Engine) -> str | None:
    """The message for a rebuild of ``key`` that gave another engine than the entry it replaced; None when the
    engine is the same, or no replaced entry exists (a first build)."""
    old_sha256 = cache.replaced_engine_sha256(key)
    new_sha256 = engine.result.engine_sha256
    if old_sha256 is None or old_sha256 == new_sha256:
        return None
    try:
        from pytest_trt.buildlog.record_diff import diff_records
        from pytest_trt.engines.record_store import load_record

        previous = cache.load_replaced(key)
        old_record = load_record(cache.replaced_dir(key), previous) or engine.backend.record(previous, engine.config)
        diff = diff_records(old_record, engine.record, mask_tactics=False)
        structure = "same layers and tactics" if diff.is_empty else diff.render()
    except Exception as exc:  # noqa: BLE001 - a record that cannot be made still leaves the bytes compared
        structure = f"records not compared ({type(exc).__name__}: {exc})"
    return (f"rebuild of {engine.config.name!r} ({engine.backend_name}) gave another engine for the same pinned "
            f"config (config hash {engine.result.config_hash[:12]}): engine sha256 {old_sha256[:12]} -> "
            f"{new_sha256[:12]}; build record diff: {structure}")


class RebuildCheck:
    """The per-test comparison, its report sections and the run's summary of rebuilds that gave another engine."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.require = opt.flag_value(config, opt.REQUIRE_DETERMINISTIC_OPT)
        self.messages: list[str] = []
        self._checked: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        report = yield
        if call.when != "call":
            return report
        from pytest_trt.pytest_plugin.session import RECORD, session_of

        record = item.stash.get(RECORD, None)
        built = [e for e in (record.engines if record is not None else []) if not e.cached
                 and e.artifact_dir is not None and e.artifact_dir.name not in self._checked]
        if not built:
            return report
        provider = session_of(item.config).provider
        provider.flush()  # the new entries on disk: the replaced ones are set aside by then
        for engine in built:
            assert engine.artifact_dir is not None
            key = engine.artifact_dir.name
            self._checked.add(key)
            message = compare_rebuild(provider.cache, key, engine)
            if message is None:
                provider.cache.drop_replaced(key)
                continue
            self.messages.append(message)
            report.sections.append((SECTION, message))
            if self.require:
                where = provider.cache.restore_replaced(key)
                report.outcome = "failed"
                report.longrepr = (f"{message}\nini {opt.INI_REQUIRE_DETERMINISTIC} = true requires the same engine: "
                                   "pin what varies (the timing cache, tactic sources, the builder optimization "
                                   f"level) or turn the ini key off; the cache entry {where} was left as it was")
            else:
                provider.cache.drop_replaced(key)
        return report

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_KEY] = list(self.messages)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.messages.extend(getattr(node, "workeroutput", {}).get(WORKER_KEY, ()))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.messages:
            return
        terminalreporter.section("pytest-trt rebuilds that gave another engine", sep="-")
        for message in self.messages:
            terminalreporter.write_line(message)
