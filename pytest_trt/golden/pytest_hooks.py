"""pytest hooks of the golden workflow: options, ini keys, the ``trt_golden`` fixture, a summary.

Registered by ``pytest_trt.plugin`` (``HOOK_MODULES``).  Thin on purpose: decisions
live in :mod:`pytest_trt.golden.workflow`, imported only when a test asks for
the fixture, so loading the plugin never imports h5py or numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt.compare.thresholds import Thresholds, parse_ini_value, threshold_names
from pytest_trt.errors import GoldenError
from pytest_trt.golden.options import (
    APPROVE_OPTION,
    APPROVE_REPORT_OPTION,
    ENGINE_BUILD_OPTION,
    ENGINE_FIXTURE,
    GOLDEN_DIR_DEFAULT,
    GOLDEN_DIR_INI,
    GOLDEN_DIR_OPTION,
    MARKER,
    NOTE_PROPERTY,
    PROVENANCE_FAIL_ON_INI,
    PROVENANCE_INI,
    PROVENANCE_OPTION,
    REFRESHED_PROPERTY,
    THRESHOLD_INI_PREFIX,
    UPDATE_OPTION,
)
from pytest_trt.golden.provenance import COMPARE, POLICY_FIELDS, POLICY_MODES, ProvenancePolicy
from pytest_trt.keys import GOLDEN_VERDICTS

if TYPE_CHECKING:
    from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

__all__ = [
    "APPROVE_OPTION", "ENGINE_BUILD_OPTION", "GOLDEN_DIR_INI", "GOLDEN_DIR_OPTION", "REFRESHED_PROPERTY",
    "THRESHOLD_INI_PREFIX", "UPDATE_OPTION", "trt_golden",
]


@dataclass
class _State:
    golden_dir: Path
    update: bool
    approve: str | None
    defaults: dict[str, Any]
    rootdir: Path
    command_args: tuple[str, ...] = ()
    given: frozenset[str] = frozenset()  # thresholds the ini sets (to values other than the built-in)
    policy: ProvenancePolicy = field(default_factory=ProvenancePolicy)
    approve_report: dict[str, Any] | None = None
    refreshed: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    settings: GoldenSettings | None = None


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trt", "TensorRT engine regression testing")
    group.addoption(GOLDEN_DIR_OPTION, dest="trt_golden_dir", metavar="DIR", default=None,
                    help=f"folder of golden HDF5 files, one per model (default: ini {GOLDEN_DIR_INI} or "
                         f"'{GOLDEN_DIR_DEFAULT}').")
    group.addoption(UPDATE_OPTION, dest="trt_update_golden", action="store_true", default=False,
                    help=f"write new golden snapshots instead of comparing; needs {APPROVE_OPTION}.")
    group.addoption(APPROVE_OPTION, dest="trt_approve", metavar="REASON", default=None,
                    help=f"reason recorded with every snapshot written by {UPDATE_OPTION} "
                         "(e.g. 'TRT 10.13 upgrade, CR-1234').")
    group.addoption(PROVENANCE_OPTION, dest="trt_golden_provenance", choices=POLICY_MODES, default=None,
                    help=f"a golden of another backend version, device or config: '{COMPARE}' it anyway and report "
                         f"the differences (default: ini {PROVENANCE_INI} or '{COMPARE}'), or 'fail'.")
    group.addoption(APPROVE_REPORT_OPTION, dest="trt_approve_report", metavar="HTML", default=None,
                    help=f"with {APPROVE_OPTION}: the upgrade report (pytest-trt upgrade-report) the approval was "
                         "made on; its sha256 is recorded in APPROVALS.jsonl and the golden's history.")
    parser.addini(GOLDEN_DIR_INI, type="string", default=GOLDEN_DIR_DEFAULT,
                  help="folder of golden HDF5 files, relative to the ini file.")
    parser.addini(PROVENANCE_INI, type="string", default=COMPARE,
                  help=f"golden provenance policy: {' or '.join(POLICY_MODES)} (see {PROVENANCE_OPTION}).")
    parser.addini(PROVENANCE_FAIL_ON_INI, type="args", default=[],
                  help=f"provenance fields that fail a golden check even under '{COMPARE}': "
                       f"{', '.join(POLICY_FIELDS)}.")
    defaults = Thresholds()
    for name in threshold_names():
        parser.addini(f"{THRESHOLD_INI_PREFIX}{name}", type="string", default=str(getattr(defaults, name)),
                      help=f"default golden threshold {name} ('none' switches it off).")


def _golden_dir(config: pytest.Config) -> Path:
    given = config.getoption("trt_golden_dir")
    if given:
        return (Path(config.invocation_params.dir) / str(given)).resolve()
    base = config.inipath.parent if config.inipath else config.rootpath
    return (base / str(config.getini(GOLDEN_DIR_INI))).resolve()


def _engine_args(config: pytest.Config) -> tuple[str, ...]:
    """Options given on this command line that choose the engine, for the update command we print."""
    args: list[str] = []
    backend = config.getoption("trt_backend", default=None)
    if backend:
        args.append(f"--trt-backend {backend}")
    golden_dir = config.getoption("trt_golden_dir", default=None)
    if golden_dir:
        args.append(f"{GOLDEN_DIR_OPTION} {golden_dir}")
    return tuple(args)


def pytest_configure(config: pytest.Config) -> None:
    update, approve = config.getoption("trt_update_golden"), config.getoption("trt_approve")
    if update and not (approve and approve.strip()):
        raise pytest.UsageError(
            f"{UPDATE_OPTION} writes approved goldens only: add {APPROVE_OPTION} \"REASON\" "
            f"(e.g. {APPROVE_OPTION} \"TRT 10.13 upgrade, CR-1234\")"
        )
    if approve and not update:
        raise pytest.UsageError(f"{APPROVE_OPTION} is used only with {UPDATE_OPTION}; add it, or drop {APPROVE_OPTION}")
    report = _approve_report(config, approve)
    defaults: dict[str, Any] = {}
    builtin = Thresholds()
    for name in threshold_names():
        try:
            defaults[name] = parse_ini_value(name, str(config.getini(f"{THRESHOLD_INI_PREFIX}{name}")))
        except GoldenError as exc:
            raise pytest.UsageError(exc.message) from None
    given = frozenset(n for n, v in defaults.items()
                      if v is not None and v != getattr(builtin, n) and n != "allow_nonfinite")
    state = _State(_golden_dir(config), bool(update), approve, defaults, config.rootpath,
                   command_args=_engine_args(config), given=given, policy=_policy(config),
                   approve_report=report)
    config.stash[_STATE] = state
    if update:
        config.pluginmanager.register(_RefreshSummary(state), "trt-golden-refresh-summary")
    else:
        config.pluginmanager.register(_NoteSummary(state), "trt-golden-provenance-notes")


def _policy(config: pytest.Config) -> ProvenancePolicy:
    mode = config.getoption("trt_golden_provenance") or str(config.getini(PROVENANCE_INI)).strip() or COMPARE
    fail_on = tuple(str(f) for f in config.getini(PROVENANCE_FAIL_ON_INI))
    try:
        return ProvenancePolicy(mode, fail_on)
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} (ini {PROVENANCE_INI} / {PROVENANCE_FAIL_ON_INI}, option {PROVENANCE_OPTION})"
                                ) from None


def _approve_report(config: pytest.Config, approve: str | None) -> dict[str, Any] | None:
    given = config.getoption("trt_approve_report")
    if not given:
        return None
    if not approve:
        raise pytest.UsageError(f"{APPROVE_REPORT_OPTION} goes with {APPROVE_OPTION} \"REASON\" and {UPDATE_OPTION}")
    from pytest_trt.errors import ReportReferenceError
    from pytest_trt.golden.report_reference import report_reference

    try:
        return report_reference(Path(config.invocation_params.dir) / str(given))
    except ReportReferenceError as exc:
        raise pytest.UsageError(str(exc)) from None


def _settings(state: _State) -> GoldenSettings:
    if state.settings is None:
        from pytest_trt.compare.thresholds import ThresholdSet
        from pytest_trt.golden.workflow import GoldenSettings

        state.settings = GoldenSettings(
            golden_dir=state.golden_dir, update=state.update, approve=state.approve,
            thresholds=ThresholdSet(Thresholds(**state.defaults), given=state.given), rootdir=state.rootdir,
            command_args=state.command_args, provenance=state.policy, approve_report=state.approve_report,
        )
    return state.settings


def _marker_config(request: pytest.FixtureRequest) -> Any:
    marker = request.node.get_closest_marker(MARKER)
    config = (marker.args[0] if marker.args else marker.kwargs.get("config")) if marker else None
    if config is None or not hasattr(config, "name"):
        raise GoldenError(f"{request.node.nodeid}: check(outputs) needs @pytest.mark.{MARKER}(config) on the test")
    return config


@pytest.fixture
def trt_golden(request: pytest.FixtureRequest) -> GoldenCheck:
    """Golden snapshot check of the test's engine: ``trt_golden.check(trt_engine, l2_delta=0.05)``."""
    from pytest_trt.golden.workflow import GoldenCheck
    from pytest_trt.invocation import pasteable_nodeid

    state = request.config.stash[_STATE]
    node = request.node

    def on_update(result: Any) -> None:
        # user_properties travel from xdist workers to the controller with the report
        node.user_properties.append((REFRESHED_PROPERTY, "\n".join(result.summary_lines())))

    return GoldenCheck(
        _settings(state),
        engine_provider=lambda: request.getfixturevalue(ENGINE_FIXTURE),
        config_provider=lambda: _marker_config(request),
        nodeid=node.nodeid,
        command_nodeid=pasteable_nodeid(
            node.nodeid, rootpath=request.config.rootpath, invocation_dir=request.config.invocation_params.dir
        ),
        on_update=on_update,
        on_verdict=node.stash.setdefault(GOLDEN_VERDICTS, []).append,
        on_note=lambda note: node.user_properties.append((NOTE_PROPERTY, note)),
    )


class _RefreshSummary:
    """Collects refreshed-golden lines from reports (also those of xdist workers) for the summary."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.state.refreshed += [(report.nodeid, str(v)) for k, v in report.user_properties
                                     if k == REFRESHED_PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        state, write = self.state, terminalreporter.write_line
        terminalreporter.section("trt goldens refreshed")
        if not state.refreshed:
            write(f"no golden was refreshed (approval: {state.approve!r})")
            return
        write(f"approval: {state.approve!r}; what each refresh changed (new vs previous generation):")
        for nodeid, text in state.refreshed:
            write(nodeid)
            for line in text.splitlines():
                write(f"  {line}")
        write(f"approvals recorded in {state.golden_dir / 'APPROVALS.jsonl'}")


class _NoteSummary:
    """Prints the provenance notes of passing checks (golden of another backend version, device, config)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            self.state.notes += [(report.nodeid, str(v)) for k, v in report.user_properties if k == NOTE_PROPERTY]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.state.notes:
            return
        terminalreporter.section("trt golden provenance")
        for nodeid, text in self.state.notes:
            terminalreporter.write_line(nodeid)
            for line in text.splitlines():
                terminalreporter.write_line(f"  {line}")
