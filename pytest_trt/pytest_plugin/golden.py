"""The golden workflow's pytest side: settings from the option table, the ``trt_golden`` check, summaries.

Decisions live in :mod:`pytest_trt.golden.workflow`, imported only when a test
asks for ``trt_golden``, so loading the plugin never imports h5py or numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_trt import options as opt
from pytest_trt.compare.thresholds import Thresholds, parse_ini_value, threshold_names
from pytest_trt.errors import GoldenError

if TYPE_CHECKING:
    from pytest_trt.golden.provenance import ProvenancePolicy
    from pytest_trt.golden.signing import Signer
    from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings
    from pytest_trt.pytest_plugin.record import ItemRecord


@dataclass
class GoldenState:
    """The session's golden settings (from the command line and ini) and what its checks reported."""

    golden_dir: Path
    update: bool
    approve: str | None
    defaults: dict[str, Any]
    rootdir: Path
    given: frozenset[str]  # thresholds the ini sets (to values other than the built-in)
    policy_args: tuple[str, tuple[str, ...]]  # (mode, fields that fail anyway), checked at configure
    command_args: tuple[str, ...] = ()
    approve_report: dict[str, Any] | None = None
    signatures: SignatureSettings | None = None
    measure_noise: bool = True
    #: this process's refreshes and notes, (test id, text); an xdist worker sends them in its WorkerOutput
    refreshed: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    _settings: GoldenSettings | None = None

    @property
    def policy(self) -> ProvenancePolicy:
        from pytest_trt.golden.provenance import ProvenancePolicy

        return ProvenancePolicy(*self.policy_args)

    @classmethod
    def from_config(cls, config: pytest.Config) -> GoldenState:
        """Read and check the golden options; a bad combination is a :class:`pytest.UsageError`."""
        update = bool(opt.value(config, opt.UPDATE_GOLDEN_OPT))
        approve = opt.value(config, opt.APPROVE_OPT)
        if update and not (approve and str(approve).strip()):
            raise pytest.UsageError(
                f"{opt.UPDATE_GOLDEN} writes approved goldens only: add {opt.APPROVE} \"REASON\" "
                f"(e.g. {opt.APPROVE} \"TRT 10.13 upgrade, CR-1234\")"
            )
        if approve and not update:
            raise pytest.UsageError(
                f"{opt.APPROVE} is used only with {opt.UPDATE_GOLDEN}; add it, or drop {opt.APPROVE}")
        defaults: dict[str, Any] = {}
        builtin = Thresholds()
        for name in threshold_names():
            try:
                defaults[name] = parse_ini_value(name, str(config.getini(f"{opt.THRESHOLD_INI_PREFIX}{name}")))
            except GoldenError as exc:
                error = exc
            else:
                continue
            from pytest_trt.pytest_plugin.outcomes import raise_outcome

            raise_outcome(error, configure=True)
        given = frozenset(n for n, v in defaults.items()
                          if v is not None and v != getattr(builtin, n) and n != "allow_nonfinite")
        golden_dir = opt.path(config, opt.GOLDEN_DIR_OPT)
        assert golden_dir is not None  # it has a default
        return cls(golden_dir, update, approve, defaults, config.rootpath, given, _policy_args(config),
                   command_args=opt.repeated_args(config), approve_report=_approve_report(config, approve),
                   signatures=SignatureSettings.from_config(config, update=update),
                   measure_noise=bool(opt.value(config, opt.MEASURE_NOISE_OPT)))

    def settings(self) -> GoldenSettings:
        """The workflow's settings, made on first use (imports the workflow's light half)."""
        if self._settings is None:
            from pytest_trt.compare.thresholds import ThresholdSet
            from pytest_trt.golden.workflow import GoldenSettings

            self._settings = GoldenSettings(
                golden_dir=self.golden_dir, update=self.update, approve=self.approve,
                thresholds=ThresholdSet(Thresholds(**self.defaults), given=self.given), rootdir=self.rootdir,
                command_args=self.command_args, provenance=self.policy, approve_report=self.approve_report,
                measure_noise=self.measure_noise,
                **(self.signatures.settings() if self.signatures is not None else {}),
            )
        return self._settings

    def check(self, request: pytest.FixtureRequest, record: ItemRecord) -> GoldenCheck:
        """The ``trt_golden`` object of one test: its verdicts go to ``record``, its notes to the report."""
        from pytest_trt.golden.workflow import GoldenCheck
        from pytest_trt.pytest_plugin.invocation import pasteable_nodeid

        node = request.node
        check = GoldenCheck(
            self.settings(),
            engine_provider=lambda: request.getfixturevalue(opt.ENGINE_FIXTURE),
            config_provider=lambda: marker_config(request),
            nodeid=node.nodeid,
            command_nodeid=pasteable_nodeid(
                node.nodeid, rootpath=request.config.rootpath, invocation_dir=request.config.invocation_params.dir
            ),
            on_update=lambda result: self.refreshed.append((node.nodeid, "\n".join(result.summary_lines()))),
            on_verdict=record.add_verdict,
            on_note=lambda note: self.notes.append((node.nodeid, note)),
        )
        return check

    def prefetch(self, node: Any) -> None:
        """Start hashing the golden of ``node``'s ``@pytest.mark.trt`` config on another core, when the test asks
        for ``trt_golden`` (:func:`pytest_trt.golden.workflow.prefetch`); nothing when it is hashed already."""
        if node is None or opt.GOLDEN_FIXTURE not in getattr(node, "fixturenames", ()):
            return
        marker = node.get_closest_marker(opt.MARKER)
        config = (marker.args[0] if marker.args else marker.kwargs.get("config")) if marker else None
        name = getattr(config, "name", None)
        if isinstance(name, str):
            from pytest_trt.golden.workflow import prefetch

            prefetch(self.settings(), name)

    @property
    def has_summary(self) -> bool:
        return self.update or bool(self.notes)

    def summary(self, refreshed: list[tuple[str, str]], notes: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
        """(section title, lines) for the terminal summary of ``refreshed`` and ``notes`` (this process's and its
        workers')."""
        if self.update:
            if not refreshed:
                return [("trt goldens refreshed", [f"no golden was refreshed (approval: {self.approve!r})"])]
            lines = [f"approval: {self.approve!r}; what each refresh changed (new vs previous generation):"]
            for nodeid, text in refreshed:
                lines += [nodeid, *(f"  {line}" for line in text.splitlines())]
            lines.append(f"approvals recorded in {self.golden_dir / 'APPROVALS.jsonl'}")
            signer = self.signatures.signer if self.signatures is not None else None
            lines.append(f"approvals signed by {signer.principal} (key {signer.fingerprint})" if signer is not None
                         else f"approvals UNSIGNED: sign them with {opt.APPROVE_KEY}=KEY (an SSH key)")
            return [("trt goldens refreshed", lines)]
        if not notes:
            return []
        lines = []
        for nodeid, text in notes:
            lines += [nodeid, *(f"  {line}" for line in text.splitlines())]
        return [("trt golden provenance", lines)]


@dataclass(frozen=True)
class SignatureSettings:
    """Signed approvals: the session's approval signer, the allowed-signers file, the sign-off rule."""

    signer: Signer | None
    approvers: Path | None
    require_signed: bool
    approvals_required: int
    bundle_signer: str | None

    @classmethod
    def from_config(cls, config: pytest.Config, *, update: bool) -> SignatureSettings | None:
        """None when nothing is signed or required (no import, no subprocess); bad settings are UsageErrors."""
        approvers = opt.path(config, opt.APPROVERS_OPT)
        require = opt.flag_value(config, opt.REQUIRE_SIGNED_OPT)
        text = str(opt.value(config, opt.APPROVALS_REQUIRED_OPT)).strip()
        try:
            required = int(text)
        except ValueError:
            required = 0
        if required < 1:
            raise pytest.UsageError(f"ini {opt.INI_APPROVALS_REQUIRED} = {text!r}: give a whole number of signers, "
                                    "1 or more (2: two-person rule)")
        explicit_key = opt.path(config, opt.APPROVE_KEY_OPT)
        needed = require or required > 1
        if needed and approvers is None:
            raise pytest.UsageError(
                f"ini {opt.INI_REQUIRE_SIGNED if require else opt.INI_APPROVALS_REQUIRED} checks approval "
                f"signatures against an allowed-signers file: set ini {opt.INI_APPROVERS} = approvers.allowed_signers "
                "(OpenSSH format, one line per approver: `you@example.com namespaces=\"pytest-trt-approval\" "
                "ssh-ed25519 AAAA...`)")
        if approvers is not None and not approvers.is_file():
            raise pytest.UsageError(f"ini {opt.INI_APPROVERS}: allowed-signers file {approvers} does not exist; "
                                    "create it (OpenSSH allowed_signers format) or fix the path")
        if not needed and approvers is None and explicit_key is None:
            return None
        signer = _signer(config, explicit_key, approvers, needed) if update else None
        bundle_key = opt.path(config, opt.SIGN_KEY_OPT)
        bundle_signer = _bundle_fingerprint(bundle_key) if bundle_key is not None and (update or needed) else None
        return cls(signer, approvers, require, required, bundle_signer)

    def settings(self) -> dict[str, Any]:
        return {"signer": self.signer, "approvers": self.approvers, "require_signed": self.require_signed,
                "approvals_required": self.approvals_required, "bundle_signer": self.bundle_signer}


def _signer(config: pytest.Config, explicit: Path | None, approvers: Path | None, needed: bool) -> Signer | None:
    """The refresh session's approval signer, checked by signing once now (before any golden moves)."""
    from pytest_trt.errors import SigningUnavailable
    from pytest_trt.golden import signing

    key = signing.approval_key(explicit, config.rootpath)
    if key is None:
        if needed:
            raise pytest.UsageError(
                f"this project requires signed approvals (ini {opt.INI_REQUIRE_SIGNED} / "
                f"{opt.INI_APPROVALS_REQUIRED}): give your SSH key with {opt.APPROVE_KEY}=~/.ssh/id_ed25519 "
                f"(or ini {opt.INI_APPROVE_KEY}, or git config user.signingkey)")
        return None
    email = signing.git_value(["config", "user.email"], config.rootpath)
    try:
        return signing.preflight(key, approvers, fallback_principal=email)
    except (signing.SigningFailed, SigningUnavailable) as exc:
        raise pytest.UsageError(f"{opt.APPROVE_KEY}: {exc}") from None


def _bundle_fingerprint(key: Path) -> str | None:
    """``SHA256:...`` of the bundle key's public half (the two-person rule compares it); None when unreadable
    (the audit options report that key's problem)."""
    try:
        from cryptography.hazmat.primitives import serialization

        from pytest_trt.audit.sign import load_private_key
        from pytest_trt.golden.signing import fingerprint_of_line

        public = load_private_key(key).public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                                 serialization.PublicFormat.OpenSSH)
        return fingerprint_of_line(public.decode("ascii"))
    except Exception:  # noqa: BLE001 - any unreadable key: pytest_plugin.audit raises the UsageError for it
        return None


def _policy_args(config: pytest.Config) -> tuple[str, tuple[str, ...]]:
    mode = str(opt.value(config, opt.PROVENANCE_OPT)).strip() or opt.PROVENANCE_OPT.default
    fail_on = tuple(str(f) for f in opt.value(config, opt.PROVENANCE_FAIL_ON_OPT))
    if mode == opt.PROVENANCE_OPT.default and not fail_on:
        return mode, fail_on  # the default policy: nothing to check, no import (start-up cost)
    from pytest_trt.golden.provenance import ProvenancePolicy

    try:
        ProvenancePolicy(mode, fail_on)
        return mode, fail_on
    except ValueError as exc:
        raise pytest.UsageError(f"{exc} (ini {opt.INI_PROVENANCE} / {opt.INI_PROVENANCE_FAIL_ON}, "
                                f"option {opt.PROVENANCE})") from None


def _approve_report(config: pytest.Config, approve: str | None) -> dict[str, Any] | None:
    report = opt.path(config, opt.APPROVE_REPORT_OPT)
    if report is None:
        return None
    if not approve:
        raise pytest.UsageError(f"{opt.APPROVE_REPORT} goes with {opt.APPROVE} \"REASON\" and {opt.UPDATE_GOLDEN}")
    from pytest_trt.errors import ReportReferenceError
    from pytest_trt.golden.report_reference import report_reference

    try:
        return report_reference(report)
    except ReportReferenceError as exc:
        raise pytest.UsageError(str(exc)) from None


def marker_config(request: pytest.FixtureRequest) -> Any:
    """The BuildConfig of the test's ``@pytest.mark.trt``, for a check of bare outputs."""
    marker = request.node.get_closest_marker(opt.MARKER)
    config = (marker.args[0] if marker.args else marker.kwargs.get("config")) if marker else None
    if config is None or not hasattr(config, "name"):
        raise GoldenError(f"{request.node.nodeid}: check(outputs) needs @pytest.mark.{opt.MARKER}(config) on the test")
    return config
