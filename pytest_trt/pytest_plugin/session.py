"""TrtSession: the one pytest-trt object of a pytest run, registered as a plugin in ``pytest_configure``.

It owns the engine provider (made on first use: a run without trt tests never
builds it), the golden settings, the bundle recorder, the device pinning and
the archive request; every test's :class:`~pytest_trt.pytest_plugin.record.ItemRecord`;
the one xdist channel and the one terminal summary.  Its hook methods only
route: decisions live in the modules of this package and the domain packages.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt
from pytest_trt.errors import TrtError

if TYPE_CHECKING:
    from pytest_trt.audit.recorder import BundleRecorder, EngineAudit
    from pytest_trt.catalog.archiving import ArchiveOutcome
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.engine import Engine
    from pytest_trt.engines.provider import EngineProvider
    from pytest_trt.golden.workflow import GoldenCheck
    from pytest_trt.pytest_plugin.archive import ArchiveRequest
    from pytest_trt.pytest_plugin.audit import AuditOptions
    from pytest_trt.pytest_plugin.channel import WorkerOutput
    from pytest_trt.pytest_plugin.devices import Pinning
    from pytest_trt.pytest_plugin.golden import GoldenState
    from pytest_trt.pytest_plugin.record import ItemRecord
    from pytest_trt.pytest_plugin.terminal import SummaryData

#: the plugin name TrtSession registers under
PLUGIN_NAME = "trt-session"
SESSION = pytest.StashKey["TrtSession"]()
#: item.stash: the test's record, made when a fixture or check first needs it (absent: the test used no engine)
RECORD = pytest.StashKey["ItemRecord"]()


def session_of(config: pytest.Config) -> TrtSession:
    """The run's TrtSession (registered by ``pytest_trt.plugin`` in ``pytest_configure``)."""
    return config.stash[SESSION]


class TrtSession:
    """pytest-trt's state and hooks for one pytest process.

    Every option is read and checked at construction (usage errors before any test);
    what a run without trt tests does not need (the audit, archive, device and xdist
    modules) is imported only when an option asks for it or on first use: start-up cost.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._is_worker = hasattr(config, "workerinput")
        self.pinning: Pinning | None = None
        if self._is_worker or opt.value(config, opt.DEVICES_OPT):  # first: before anything can initialise CUDA
            from pytest_trt.pytest_plugin.devices import pin_at_configure

            self.pinning = pin_at_configure(config)
        self.options = opt.Options.from_pytest(config)
        if self.options.rebuild and not self.options.engine_build:
            raise pytest.UsageError(f"{opt.REBUILD} rebuilds engines and so needs {opt.ENGINE_BUILD} too")
        self._golden: GoldenState | None = None
        if _golden_options_set(config):
            self._golden = self._golden_state()  # bad golden options are usage errors now
        self._audit: AuditOptions | None = None
        if any(opt.value(config, o) for o in (opt.SIGN_KEY_OPT, opt.PINS_OPT)):
            self._audit = self._audit_options()  # an unreadable key or pins file is a usage error now
        self.archive: ArchiveRequest | None = None
        if any(opt.value(config, o) for o in (opt.CATALOG_OPT, opt.MLFLOW_URI_OPT, opt.MLFLOW_REGISTER_OPT)):
            from pytest_trt.pytest_plugin.archive import ArchiveRequest

            self.archive = ArchiveRequest.from_config(config)
        self.workers: list[WorkerOutput] = []  # what xdist workers sent (controller only)
        self.archived: ArchiveOutcome | None = None
        self._provider: EngineProvider | None = None
        self._recorder: BundleRecorder | None = None

    @classmethod
    def register(cls, config: pytest.Config) -> TrtSession:
        session = config.stash[SESSION] = cls(config)
        config.pluginmanager.register(session, PLUGIN_NAME)
        if getattr(config.option, "dist", None) == "loadgroup" and not session._is_worker:
            from pytest_trt.pytest_plugin.scheduling import GroupsFolder

            config.pluginmanager.register(GroupsFolder(), GroupsFolder.NAME)
        pins = session._audit.pins if session._audit is not None else None
        if pins is not None and not session._is_worker:  # the controller checks for all workers
            session._check_pins(pins)
        return session

    @property
    def golden(self) -> GoldenState:
        """The golden settings and what the checks reported, read on first use when no golden option is set."""
        if self._golden is None:
            self._golden = self._golden_state()
        return self._golden

    @property
    def golden_state(self) -> GoldenState | None:
        """The golden state if made (a golden option, check or collected note made it), without making it."""
        return self._golden

    def _golden_state(self) -> GoldenState:
        from pytest_trt.pytest_plugin.golden import GoldenState

        return GoldenState.from_config(self.config)

    @property
    def audit(self) -> AuditOptions:
        """The audit options (bundle folder, signing key, pins, ini switches), read on first use."""
        if self._audit is None:
            self._audit = self._audit_options()
        return self._audit

    def _audit_options(self) -> AuditOptions:
        from pytest_trt.pytest_plugin.audit import AuditOptions

        return AuditOptions.from_config(self.config)

    def record(self, item: pytest.Item) -> ItemRecord:
        """The test's record, made on first use."""
        record = item.stash.get(RECORD, None)
        if record is None:
            from pytest_trt.pytest_plugin.record import ItemRecord

            record = item.stash[RECORD] = ItemRecord()
        return record

    # -- what the session owns, made on first use ---------------------------------------------
    @property
    def provider(self) -> EngineProvider:
        """The engine provider (backend choice, cache), made on first use by a trt test, fixture or header."""
        if self._provider is None:
            self._provider = self._make_provider()
        return self._provider

    @property
    def recorder(self) -> BundleRecorder:
        """The bundle recorder, made on first use (captures the environment once)."""
        if self._recorder is None:
            name = self.provider.backend_name
            self._recorder = self.audit.recorder(None if name == "none" else name)
        return self._recorder

    def _make_provider(self) -> EngineProvider:
        from pytest_trt.pytest_plugin.engines import make_provider

        return make_provider(self.config, self.options)

    def _check_pins(self, pins: Any) -> None:
        from pytest_trt.pytest_plugin.audit import pins_problem

        problem = pins_problem(pins, self.recorder.environment)
        if problem is None:
            return
        text, fatal = problem
        if fatal:
            raise pytest.UsageError(text)
        self.config.issue_config_time_warning(pytest.PytestWarning(text), stacklevel=2)

    # -- what the fixtures ask -----------------------------------------------------------------
    def engine(self, request: pytest.FixtureRequest, config: BuildConfig) -> Engine:
        """The engine of ``config`` for a test: skip when not built, fail with the message on user errors."""
        from pytest_trt.pytest_plugin.engines import engine_for

        return engine_for(self.provider, self.record(request.node), config)

    def backend(self) -> Any:
        """The session's backend object, or a skip saying why there is none."""
        from pytest_trt.pytest_plugin.engines import backend_of

        return backend_of(self.provider)

    def golden_check(self, request: pytest.FixtureRequest) -> GoldenCheck:
        return self.golden.check(request, self.record(request.node))

    def device(self) -> str | None:
        return self.pinning.pinned if self.pinning else None

    # -- hooks ---------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> pytest.CollectReport | None:
        if not isinstance(collector, pytest.Module):
            return None
        from pytest_trt.pytest_plugin.collect_errors import make_collect_report

        return make_collect_report(collector)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from pytest_trt.pytest_plugin.devices import header, pinning
        from pytest_trt.pytest_plugin.report import header_lines

        if self.pinning is None:  # not pinned: nothing is pinned by this call either (no index, nothing given)
            self.pinning = pinning("", None)
        return header_lines(self.provider) + header(config, self.pinning)

    @pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the xdist_group marks added here
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        marked = [(item, mark) for item in items for mark in item.iter_markers(opt.MARKER)]
        if not marked:  # a run without trt tests loads none of pytest-trt's modules
            return
        from pytest_trt.config import BuildConfig

        problems = [
            f"{item.nodeid}: @pytest.mark.trt takes exactly one BuildConfig, got args={mark.args!r} "
            f"kwargs={mark.kwargs!r}"
            for item, mark in marked
            if len(mark.args) != 1 or mark.kwargs or not isinstance(mark.args[0], BuildConfig)
        ]
        if problems:
            raise pytest.UsageError("invalid trt markers:\n  " + "\n  ".join(problems))
        if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
            from pytest_trt.pytest_plugin.grouping import group_by_config

            group_by_config(marked)

    @pytest.hookimpl(tryfirst=True)  # a worker's groups are on disk before pytest-xdist reports its collection
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The first golden test's golden starts being checked on another core now (not in an xdist worker, which
        runs only the tests it is sent): the digest overlaps the session's start too.  Under ``--dist loadgroup``
        the first worker writes the tests' groups for the controller's scheduler."""
        workerinput = getattr(session.config, "workerinput", None)
        if workerinput is not None:
            from pytest_trt.pytest_plugin.grouping import GROUPS_DIR_KEY, GROUPS_WRITER

            if GROUPS_DIR_KEY in workerinput and workerinput["workerid"] == GROUPS_WRITER:
                from pathlib import Path

                from pytest_trt.pytest_plugin.grouping import write_groups

                write_groups(Path(workerinput[GROUPS_DIR_KEY]), workerinput["workerid"], session.items)
            return
        first = next((item for item in session.items if opt.GOLDEN_FIXTURE in getattr(item, "fixturenames", ())
                      and item.get_closest_marker(opt.MARKER) is not None), None)
        if first is not None:
            self.golden.prefetch(first)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """The test's golden starts being checked on another core (once; used only for the file as it was hashed)
        before its fixtures are set up: the digest overlaps the engine's build or load."""
        if opt.GOLDEN_FIXTURE in getattr(item, "fixturenames", ()) and item.get_closest_marker(opt.MARKER) is not None:
            self.golden.prefetch(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
        """After a test, the engines the next test does not name let go of their cached bytes (a stamped cache file
        is read again on use): a session keeps one config's engine in memory at a time, not every one it met."""
        try:
            return (yield)
        finally:
            record = item.stash.get(RECORD, None)
            if record is not None and record.engines:
                mark = nextitem.get_closest_marker(opt.MARKER) if nextitem is not None else None
                keep = mark.args[0] if mark is not None and mark.args else None
                for engine in record.engines:
                    if engine.config != keep:
                        engine.result.release_engine()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        from pytest_trt.engines.current import begin_test, end_test

        record = item.stash.get(RECORD, None)
        if record is None and any(name.startswith("trt_") for name in getattr(item, "fixturenames", ())):
            record = self.record(item)  # trt_build may add engines during the call: the list must be the record's
        token = begin_test(record.engines if record is not None else [])
        try:
            return (yield)
        except TrtError as exc:
            error = exc
        finally:
            end_test(token)
        from pytest_trt.pytest_plugin.outcomes import raise_outcome

        raise_outcome(error)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
        # Audit before the report is made, so its user_properties (junit XML, carried by
        # pytest-xdist) and sections include the bundle; at "call", or at "teardown" when
        # the call phase never ran.
        record = item.stash.get(RECORD, None)
        if record is None:  # the test used no engine: nothing to do (the common per-test path)
            return (yield)
        audits: list[EngineAudit] = []
        if call.excinfo is not None and call.when == "setup" and record.engines:
            from pytest_trt.pytest_plugin.audit import SETUP_FAILURE, failure_line

            line = failure_line(call)
            if line is not None:
                item.stash[SETUP_FAILURE] = line
        if call.when in ("call", "teardown") and not record.audited:
            record.audited = True
            if record.engines:
                from pytest_trt.pytest_plugin.audit import SETUP_FAILURE, audit_item, failure_line

                failure = failure_line(call) if call.when == "call" else item.stash.get(SETUP_FAILURE, None)
                audits = audit_item(self.recorder, item, record, call.when, failure)
        if record.build_failure is not None and call.when == "setup":
            from pytest_trt.pytest_plugin.audit import note_build_failure

            note_build_failure(self.recorder, item, record.build_failure)
        report = yield
        if audits:
            from pytest_trt.pytest_plugin.audit import html_extras

            html_extras(self.config, report, audits)
        return report

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        provider = self._provider  # never made here: a run without trt tests has none
        if provider is not None:
            provider.flush()  # every cache entry of the session on disk before pytest exits
            if provider.engines:
                for engine in provider.engines:  # engines no test listed (session fixtures, trt_build in conftest)
                    self.recorder.audit(engine, [])
            if self._recorder is not None:
                self._recorder.settle()  # fresh builds' bundles: the next session's hit keeps them unread
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:  # pytest-xdist worker: one document to the controller
            self.own_output().send(workeroutput)
        elif self.archive is not None:
            self._archive()

    def own_output(self) -> WorkerOutput:
        """What this process made: engine rows, cache write errors, bundles, bundle failures, golden lines."""
        from pytest_trt.pytest_plugin.channel import WorkerOutput

        out = WorkerOutput()
        if self._provider is not None:
            from pytest_trt.pytest_plugin.report import summary_rows

            out.engines = summary_rows(self._provider)
            out.cache_errors = list(self._provider.write_errors)
        if self._recorder is not None:
            from pytest_trt.audit.recorder import summary_rows as bundle_rows

            out.bundles = bundle_rows(self._recorder)
            out.bundle_failures = list(self._recorder.failures)
        if self._golden is not None:
            out.golden_refreshed = list(self._golden.refreshed)
            out.golden_notes = list(self._golden.notes)
        return out

    def summary_data(self) -> SummaryData:
        """What the terminal summary prints: this process's output and its workers', the archive, golden sections."""
        from pytest_trt.pytest_plugin.terminal import SummaryData

        out = self.own_output()
        for worker in self.workers:
            out.merge(worker)
        golden = self._golden
        if golden is None and (out.golden_refreshed or out.golden_notes):  # an xdist controller: the workers checked
            golden = self.golden
        sections = golden.summary(out.golden_refreshed, out.golden_notes) if golden is not None else []
        return SummaryData(out, self.archived, sections)

    def _archive(self) -> None:
        assert self.archive is not None
        from pathlib import Path

        rows = self.own_output().bundles + [row for w in self.workers for row in w.bundles]
        paths = [Path(row["path"]) for row in rows]
        if paths:
            self.archived = self.archive.run(paths, self.audit.bundle_dir, self.config.invocation_params.dir)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        from pytest_trt.pytest_plugin.channel import WorkerOutput

        self.workers.append(WorkerOutput.received(getattr(node, "workeroutput", {})))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self._is_worker or not (self._provider or self._recorder or self.workers or self.archived
                                   or (self._golden is not None and self._golden.has_summary)):
            return  # no one reads a worker's; nothing to say (a run without trt tests): import nothing
        from pytest_trt.pytest_plugin.terminal import write_summary

        write_summary(terminalreporter, self.summary_data())


def _golden_options_set(config: pytest.Config) -> bool:
    """Whether any golden option or threshold ini is set (then it is checked at configure, else on first use)."""
    if any(opt.value(config, o) != o.default for o in (opt.UPDATE_GOLDEN_OPT, opt.APPROVE_OPT, opt.APPROVE_REPORT_OPT,
                                                        opt.PROVENANCE_OPT)):
        return True
    if opt.value(config, opt.PROVENANCE_FAIL_ON_OPT):
        return True
    from pytest_trt.compare.thresholds import Thresholds, threshold_names

    defaults = Thresholds()
    return any(str(config.getini(f"{opt.THRESHOLD_INI_PREFIX}{n}")) != str(getattr(defaults, n))
               for n in threshold_names())
