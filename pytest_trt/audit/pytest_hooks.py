"""pytest hooks of the audit layer: bundle options, version pins, report attachments.

Registered by ``pytest_trt.plugin`` (``HOOK_MODULES``).  Hooks construct and
delegate (:mod:`pytest_trt.audit.recorder`, :mod:`pytest_trt.audit.pins`);
loading this module imports neither tensorrt, onnxruntime nor h5py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt.keys import BUILD_FAILED, GOLDEN_VERDICTS, ITEM_ENGINES, PROVIDER, PROVIDER_FACTORY, provider_of

if TYPE_CHECKING:
    from pytest_trt.audit.recorder import BundleRecorder, EngineAudit

BUNDLE_DIR = "--trt-bundle-dir"
SIGN_KEY = "--trt-sign-key"
PINS = "--trt-pins"
INI_BUNDLE_DIR = "trt_bundle_dir"
INI_SIGN_KEY = "trt_sign_key"
INI_PINS = "trt_pins"
INI_BUNDLE_ENGINE = "trt_bundle_engine"
INI_BUNDLE_HOSTNAME = "trt_bundle_hostname"
DEFAULT_BUNDLE_DIR = "trt-bundles"
SECTION = "trt audit"
#: junit XML property names, in the order they are recorded per engine
PROPERTIES = ("trt_bundle", "trt_bundle_sha256", "trt_config_hash", "trt_backend", "trt_backend_version")

RECORDER = pytest.StashKey["BundleRecorder"]()
#: makes the recorder on first use: a run without trt engines never imports the audit modules
_RECORDER_FACTORY = pytest.StashKey[Callable[[], "BundleRecorder"]]()
_DONE = pytest.StashKey[bool]()
_WORKER_BUNDLES = pytest.StashKey[list[dict[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trt")
    group.addoption(BUNDLE_DIR, dest="trt_bundle_dir", default=None, metavar="DIR",
                    help=f"folder for audit bundles (default: {DEFAULT_BUNDLE_DIR} under the rootdir)")
    group.addoption(SIGN_KEY, dest="trt_sign_key", default=None, metavar="KEY",
                    help="Ed25519 private key (PEM or OpenSSH) that signs every bundle's manifest")
    group.addoption(PINS, dest="trt_pins", default=None, metavar="TOML",
                    help="version pins file: the session fails at start when the toolchain or device differs")
    parser.addini(INI_BUNDLE_DIR, "audit bundle folder, relative to the rootdir", default=DEFAULT_BUNDLE_DIR)
    parser.addini(INI_SIGN_KEY, "Ed25519 private key that signs bundles, relative to the rootdir", default="")
    parser.addini(INI_PINS, "version pins TOML file, relative to the rootdir", default="")
    parser.addini(INI_BUNDLE_ENGINE, "put engine.plan into bundles (false: its sha256 only)", type="bool", default=True)
    parser.addini(INI_BUNDLE_HOSTNAME, "record the host name in environment.json", type="bool", default=False)


def _path(config: pytest.Config, dest: str, ini: str) -> Path | None:
    """Command-line paths resolve against the invocation folder, ini paths against the rootdir."""
    value = config.getoption(dest)
    base = config.invocation_params.dir
    if not value:
        value, base = config.getini(ini), config.rootpath
    if not value:
        return None
    p = Path(os.path.expanduser(str(value)))
    return p if p.is_absolute() else base / p


def _backend_name(config: pytest.Config) -> str | None:
    provider = provider_of(config) if PROVIDER_FACTORY in config.stash else config.stash.get(PROVIDER, None)
    name = getattr(provider, "backend_name", None)
    return None if name in (None, "none") else str(name)


def recorder_of(config: pytest.Config) -> BundleRecorder | None:
    """The session's bundle recorder, made on first use (None when the audit layer is not configured)."""
    recorder = config.stash.get(RECORDER, None)
    if recorder is None and _RECORDER_FACTORY in config.stash:
        recorder = config.stash[RECORDER] = config.stash[_RECORDER_FACTORY]()
    return recorder


def _check_pins(config: pytest.Config) -> None:
    pins_path = _path(config, "trt_pins", INI_PINS)
    if pins_path is None:
        return
    recorder = recorder_of(config)
    assert recorder is not None  # made by this module's configure
    from pytest_trt.audit.pins import Pins, check_pins
    from pytest_trt.errors import PinsError

    try:
        pins = Pins.load(pins_path)
    except PinsError as exc:
        raise pytest.UsageError(str(exc)) from None
    problems = check_pins(pins, recorder.environment)
    if not problems:
        return
    text = (f"environment does not match the version pins in {pins_path} ({len(problems)} difference"
            f"{'s' if len(problems) != 1 else ''}):\n  " + "\n  ".join(problems)
            + "\nreview the upgrade and update the pins file, or set policy = \"warn\" there")
    if pins.policy == "warn":
        config.issue_config_time_warning(pytest.PytestWarning(text), stacklevel=2)
    else:
        raise pytest.UsageError(text)


@pytest.hookimpl(trylast=True)  # after the foundation's configure has chosen the backend
def pytest_configure(config: pytest.Config) -> None:
    sign_key = _path(config, "trt_sign_key", INI_SIGN_KEY)
    if sign_key is not None:
        from pytest_trt.audit.sign import load_private_key
        from pytest_trt.errors import KeyFileError, SigningUnavailable

        try:
            load_private_key(sign_key)
        except (KeyFileError, SigningUnavailable) as exc:
            raise pytest.UsageError(f"{SIGN_KEY}: {exc}") from None
    bundle_dir = _path(config, "trt_bundle_dir", INI_BUNDLE_DIR) or config.rootpath / DEFAULT_BUNDLE_DIR
    include_engine = bool(config.getini(INI_BUNDLE_ENGINE))
    include_hostname = bool(config.getini(INI_BUNDLE_HOSTNAME))

    def make() -> BundleRecorder:
        from pytest_trt.audit.recorder import AuditSettings, BundleRecorder

        settings = AuditSettings(bundle_dir=bundle_dir, sign_key=sign_key, include_engine=include_engine,
                                 include_hostname=include_hostname, rootdir=config.rootpath)
        return BundleRecorder(settings, backend=_backend_name(config))

    config.stash[_RECORDER_FACTORY] = make
    if not hasattr(config, "workerinput"):  # the xdist controller checks once for all workers
        _check_pins(config)


def _audit_item(item: pytest.Item, when: str) -> list[EngineAudit]:
    engines = item.stash.get(ITEM_ENGINES, [])
    recorder = recorder_of(item.config) if engines else None
    if recorder is None:
        return []
    from pytest_trt.audit.recorder import section_text

    verdicts = item.stash.get(GOLDEN_VERDICTS, [])
    audits = []
    for engine in engines:
        mine = [v for v in verdicts if v.get("config_hash") == engine.result.config_hash]
        for v in mine:
            recorder.add_golden(engine, item.nodeid, v)
        audit = recorder.audit(engine, mine)
        audits.append(audit)
        if audit.info is not None:
            values = (str(audit.info.path), audit.info.sha256, audit.info.config_hash, engine.result.backend,
                      audit.info.backend_version)
            item.user_properties.extend(zip(PROPERTIES, values, strict=True))
    if audits:
        item.add_report_section(when, SECTION, section_text(audits))
    return audits


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    # Audit before the report is made, so its user_properties (junit XML,
    # carried by pytest-xdist) and sections include the bundle; at "call", or
    # at "teardown" when the call phase never ran.
    audits: list[EngineAudit] = []
    if call.when in ("call", "teardown") and not item.stash.get(_DONE, False):
        item.stash[_DONE] = True
        audits = _audit_item(item, call.when)
    failed = item.stash.get(BUILD_FAILED, None)
    if failed is not None and call.when == "setup":
        _note_build_failure(item, failed)
    report = yield
    if audits:
        _html_extras(item.config, report, audits)
    return report


def _note_build_failure(item: pytest.Item, exc: BaseException) -> None:
    """A failed build leaves a note in the bundle folder (pytest_trt.audit.failures): "could not build"."""
    if type(exc).__name__ not in ("BuildFailed", "UnsupportedOption"):
        return
    from pytest_trt.audit.failures import note_build_failure

    recorder = recorder_of(item.config)
    if recorder is not None:
        note_build_failure(item, exc, folder=recorder.settings.bundle_dir, backend=recorder.backend)


def _html_extras(config: pytest.Config, report: pytest.TestReport, audits: list[EngineAudit]) -> None:
    if not config.pluginmanager.hasplugin("html"):
        return
    import pytest_html  # only when the plugin is active

    from pytest_trt.audit.recorder import section_text

    html_path = getattr(config.option, "htmlpath", None)
    base = Path(html_path).resolve().parent if html_path else None
    extras = list(getattr(report, "extras", []))
    for audit in audits:
        if audit.info is None:
            continue
        target = Path(audit.info.path).resolve()
        link = os.path.relpath(target, base) if base is not None else target.as_uri()
        extras.append(pytest_html.extras.url(link, name=f"trt bundle {target.name}"))
    extras.append(pytest_html.extras.text(section_text(audits), name="trt audit"))
    report.extras = extras  # type: ignore[attr-defined]  # pytest-html reads this attribute


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    provider = config.stash.get(PROVIDER, None)  # never made here: a run without trt tests has none
    engines = list(getattr(provider, "engines", []) if provider is not None else [])
    recorder = recorder_of(config) if engines else config.stash.get(RECORDER, None)
    if recorder is None:
        return
    for engine in engines:
        recorder.audit(engine, [])  # engines no test listed (session fixtures, trt_build in conftest)
    if hasattr(config, "workeroutput"):
        from pytest_trt.audit.recorder import summary_rows

        config.workeroutput["trt_bundles"] = summary_rows(recorder)
        config.workeroutput["trt_bundle_failures"] = list(recorder.failures)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    out = getattr(node, "workeroutput", {})
    node.config.stash.setdefault(_WORKER_BUNDLES, []).extend(out.get("trt_bundles", []))
    failures = out.get("trt_bundle_failures", [])
    recorder = recorder_of(node.config) if failures else None
    if recorder is not None:
        recorder.failures.extend(failures)


def session_bundles(config: pytest.Config) -> list[dict[str, Any]]:
    """Every bundle this session wrote (this process and, on the xdist controller, all workers)."""
    from pytest_trt.audit.recorder import summary_rows

    recorder = config.stash.get(RECORDER, None)
    own = summary_rows(recorder) if recorder is not None else []
    return own + config.stash.get(_WORKER_BUNDLES, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    recorder = config.stash.get(RECORDER, None)
    if recorder is None and not config.stash.get(_WORKER_BUNDLES, []):
        return
    from pytest_trt.audit.recorder import summary_rows

    rows: dict[str, dict[str, Any]] = {}
    configs: dict[str, set[str]] = {}
    own = summary_rows(recorder) if recorder is not None else []
    for row in own + config.stash.get(_WORKER_BUNDLES, []):
        rows[row["path"]] = row
        configs.setdefault(row["path"], set()).add(row["config_hash"])
    failures = list(dict.fromkeys(recorder.failures if recorder is not None else []))
    failures += [f"{Path(p).name}: written for {len(h)} configs with the same name, version, backend and device"
                 for p, h in configs.items() if len(h) > 1 and not any(Path(p).name in f for f in failures)]
    if not rows and not failures:
        return
    terminalreporter.section("pytest-trt audit bundles")
    for path, row in sorted(rows.items()):
        terminalreporter.write_line(f"{path}  sha256 {row['sha256'][:16]}  {row['size']:,} bytes")
    for line in failures:
        terminalreporter.write_line(f"WARNING {line}", yellow=True)
