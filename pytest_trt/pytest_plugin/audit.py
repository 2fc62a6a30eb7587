"""The audit layer's pytest side: settings, pins, one bundle per engine per test, report attachments.

Bundles are written by :class:`pytest_trt.audit.recorder.BundleRecorder`; this
module turns a test's record into recorder calls and report data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt

if TYPE_CHECKING:
    from pytest_trt.audit.recorder import BundleRecorder, EngineAudit
    from pytest_trt.pytest_plugin.record import ItemRecord

SECTION = "trt audit"
#: junit XML property names, in the order they are recorded per engine
PROPERTIES = ("trt_bundle", "trt_bundle_sha256", "trt_config_hash", "trt_backend", "trt_backend_version")


@dataclass(frozen=True)
class AuditOptions:
    bundle_dir: Path
    sign_key: Path | None
    pins: Path | None
    include_engine: bool
    include_hostname: bool
    rootdir: Path
    attest: bool = True

    @classmethod
    def from_config(cls, config: pytest.Config) -> AuditOptions:
        """Read the audit options; an unreadable signing key is a :class:`pytest.UsageError` now, not per bundle."""
        sign_key = opt.path(config, opt.SIGN_KEY_OPT)
        if sign_key is not None:
            from pytest_trt.audit.sign import load_private_key
            from pytest_trt.errors import KeyFileError, SigningUnavailable

            try:
                load_private_key(sign_key)
            except (KeyFileError, SigningUnavailable) as exc:
                raise pytest.UsageError(f"{opt.SIGN_KEY}: {exc}") from None
        bundle_dir = opt.path(config, opt.BUNDLE_DIR_OPT)
        assert bundle_dir is not None  # it has a default
        return cls(bundle_dir=bundle_dir, sign_key=sign_key, pins=opt.path(config, opt.PINS_OPT),
                   include_engine=opt.flag_value(config, opt.BUNDLE_ENGINE_OPT),
                   include_hostname=opt.flag_value(config, opt.BUNDLE_HOSTNAME_OPT), rootdir=config.rootpath,
                   attest=opt.flag_value(config, opt.ATTEST_OPT))

    def recorder(self, backend: str | None) -> BundleRecorder:
        from pytest_trt.audit.recorder import AuditSettings, BundleRecorder

        settings = AuditSettings(bundle_dir=self.bundle_dir, sign_key=self.sign_key, include_engine=self.include_engine,
                                 include_hostname=self.include_hostname, rootdir=self.rootdir, attest=self.attest)
        return BundleRecorder(settings, backend=backend)


def pins_problem(pins_path: Path, environment: dict[str, Any]) -> tuple[str, bool] | None:
    """(message, fatal) when the environment differs from the pins file; None when it matches."""
    from pytest_trt.audit.pins import Pins, check_pins
    from pytest_trt.errors import PinsError

    try:
        pins = Pins.load(pins_path)
    except PinsError as exc:
        raise pytest.UsageError(str(exc)) from None
    problems = check_pins(pins, environment)
    if not problems:
        return None
    text = (f"environment does not match the version pins in {pins_path} ({len(problems)} difference"
            f"{'s' if len(problems) != 1 else ''}):\n  " + "\n  ".join(problems)
            + "\nreview the upgrade and update the pins file, or set policy = \"warn\" there")
    return text, pins.policy != "warn"


#: golden.json verdict of a test that used an engine and failed before any golden check of it
NOT_CHECKED = "not checked"
#: the first line of a setup failure, kept for the audit at teardown (the call phase never ran)
SETUP_FAILURE = pytest.StashKey[str]()


def failure_line(call: pytest.CallInfo[None]) -> str | None:
    """The first line of a setup or call failure (``AssertionError: ...``); None when it passed or was skipped."""
    exc = call.excinfo
    if call.when not in ("setup", "call") or exc is None or exc.errisinstance(pytest.skip.Exception):
        return None
    return (exc.exconly().splitlines() or [exc.typename])[0][:500]


def audit_item(recorder: BundleRecorder, item: pytest.Item, record: ItemRecord, when: str,
               failure: str | None = None) -> list[EngineAudit]:
    """Bundle every engine the test used (with its golden verdicts); junit properties and the report section.

    ``failure``: the first line of the test's failure; an engine the test failed on before any golden
    check of it is recorded as "not checked" with that line, so an upgrade review can say why.
    """
    from pytest_trt.audit.recorder import section_text

    audits = []
    for engine in record.engines:
        mine = [v.to_dict() for v in record.golden if v.config_hash == engine.result.config_hash]
        if not mine and failure is not None:
            mine = [{"verdict": NOT_CHECKED, "test": item.nodeid, "config_hash": engine.result.config_hash,
                     "message": failure}]
        for v in mine:
            recorder.add_golden(engine, item.nodeid, v)
        audit = recorder.audit(engine, list(mine))
        audits.append(audit)
        if audit.info is not None:
            values = (str(audit.info.path), audit.info.sha256, audit.info.config_hash, engine.result.backend,
                      audit.info.backend_version)
            item.user_properties.extend(zip(PROPERTIES, values, strict=True))
    if audits:
        item.add_report_section(when, SECTION, section_text(audits))
    return audits


def note_build_failure(recorder: BundleRecorder, item: pytest.Item, exc: BaseException) -> None:
    """A failed build leaves a note in the bundle folder (pytest_trt.audit.failures): "could not build"."""
    from pytest_trt.errors import BuildFailed, UnsupportedOption

    if not isinstance(exc, (BuildFailed, UnsupportedOption)):
        return
    from pytest_trt.audit.failures import note_build_failure as write_note

    write_note(item, exc, folder=recorder.settings.bundle_dir, backend=recorder.backend)


def html_extras(config: pytest.Config, report: pytest.TestReport, audits: list[EngineAudit]) -> None:
    """Links to the bundles and the audit text in pytest-html's report, when that plugin writes one.

    pytest-html registers whenever it is installed, but reads ``report.extras`` only for ``--html``:
    without it the extras would be made (and ``pytest_html`` imported) for every test for nothing.
    """
    if not getattr(config.option, "htmlpath", None) or not config.pluginmanager.hasplugin("html"):
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


def bundle_summary(rows: list[dict[str, Any]], failures: list[str]) -> list[str]:
    """Lines of the "pytest-trt audit bundles" section: every bundle once, then warnings."""
    by_path: dict[str, dict[str, Any]] = {}
    configs: dict[str, set[str]] = {}
    shas: dict[str, set[str]] = {}
    for row in rows:
        by_path[row["path"]] = row
        configs.setdefault(row["path"], set()).add(row["config_hash"])
        shas.setdefault(row["path"], set()).add(row["sha256"])
    for path in (p for p, s in shas.items() if len(s) > 1):  # rewritten by several processes: the last one counts
        from pytest_trt.audit.sidecar import on_disk

        now = on_disk(Path(path))
        if now is not None:
            by_path[path] = {**by_path[path], "sha256": now[0], "size": now[1]}
    failures = list(dict.fromkeys(failures))
    failures += [f"{Path(p).name}: written for {len(h)} configs with the same name, version, backend and device"
                 for p, h in configs.items() if len(h) > 1 and not any(Path(p).name in f for f in failures)]
    lines = [f"{path}  sha256 {row['sha256'][:16]}  {row['size']:,} bytes" for path, row in sorted(by_path.items())]
    attested = [row["attested"] for row in by_path.values() if row.get("attested")]
    if attested:
        written = sum(1 for a in attested if a["written"])
        from pytest_trt.audit import bundles_in

        folders = {Path(path).parent for path in by_path}
        files = bundles_in(folders.pop()) if len(folders) == 1 else "BUNDLE..."
        how = ("signed with the --trt-sign-key key" if all(a["signed"] for a in attested)
               else f"UNSIGNED (no {opt.SIGN_KEY}): check them with 'pytest-trt attest verify {files}', without a key")
        lines.append(f"attestations: {len(attested)} bundle(s) attested in <bundle>.intoto.jsonl and .cdx.json "
                     f"({written} written now), {how}")
    return lines + [f"WARNING {line}" for line in failures]
