"""The option table: every pytest-trt option and ini key, declared once.

Read by the pytest plugin (``pytest_addoption``, :func:`value`, :func:`path`),
by the ``pytest-trt`` commands that take the same settings (:func:`add_argument`),
by the printed commands (:meth:`Option.arg`, :func:`repeated_args`), by help texts
and tests.  Names stay constants (``GOLDEN_DIR == GOLDEN_DIR_OPT.flag == "--trt-golden-dir"``).

Relative paths (the path rule): a path is relative to where it is written.
On the command line that is the current directory, where pytest (or
``pytest-trt``) was run; in an ini file it is the rootdir (the folder of the
ini file).  ``~`` is expanded.  Commands the plugin prints repeat a path as
typed, so they work when pasted where pytest ran.

Loading this module imports neither pytest nor anything heavy (the CLI reads it too).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_trt.backends import registry

#: what a value is: a switch (store_true), free text, a path, one of ``choices``, or a list of words (ini only)
Kind = Literal["bool", "text", "path", "choice", "args"]

#: the golden provenance policies (pytest_trt.golden.provenance.POLICY_MODES; a test keeps them equal)
PROVENANCE_CHOICES = ("compare", "fail")


@dataclass(frozen=True)
class Option:
    """One setting: its command-line flag and/or ini key, type, default and help.

    ``default`` is the value when neither the command line nor the ini file sets it.
    ``repeat``: commands the plugin prints (the golden update command) repeat the
    value given on the command line, because it chooses the engine or where goldens live.
    """

    flag: str | None
    ini: str | None
    kind: Kind
    default: Any
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    repeat: bool = False
    ini_help: str | None = None
    #: choices read when the option is declared or checked, not when this module loads (the backend
    #: registry: a plugin loaded with ``-p`` may add a backend after pytest-trt was imported)
    choices_of: Callable[[], tuple[str, ...]] | None = None

    def current_choices(self) -> tuple[str, ...]:
        """The allowed values now (empty: any value)."""
        return self.choices_of() if self.choices_of is not None else self.choices

    @property
    def dest(self) -> str:
        """The ``config.getoption`` name: ``--trt-golden-dir`` -> ``trt_golden_dir`` (ini-only: the ini key)."""
        if self.flag is None:
            assert self.ini is not None
            return self.ini
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def name(self) -> str:
        """How help texts and messages name it: the flag, else ``ini <key>``."""
        return self.flag or f"ini {self.ini}"

    def arg(self, value: object = None, *, placeholder: bool = False) -> str:
        """The option as typed in a printed command: ``--trt-backend onnxruntime``, ``--trt-golden-dir=g``.

        Paths take the ``=`` form: in ``--opt VALUE`` pytest counts an existing VALUE
        when it chooses the rootdir (pytest_trt.pytest_plugin.invocation); other values follow a
        space.  ``placeholder``: a word the user replaces, shown as ``--trt-approve "REASON"``.
        """
        assert self.flag is not None, f"ini {self.ini} has no command-line form"
        if self.kind == "bool":
            return self.flag
        if placeholder:
            return f'{self.flag} "{value}"'
        sep = "=" if self.kind == "path" else " "
        return f"{self.flag}{sep}{shlex.quote(str(value))}"


def _opt(flag: str | None, ini: str | None, kind: Kind, default: Any, help: str, **kw: Any) -> Option:  # noqa: A002
    return Option(flag, ini, kind, default, help, **kw)


ENGINE_BUILD_OPT = _opt("--trt-engine-build", "trt_engine_build", "bool", False,
                           "build engines that are not in the cache (default: skip tests whose engine is not cached)",
                           ini_help="build missing engines as with --trt-engine-build")
BACKEND_OPT = _opt("--trt-backend", "trt_backend", "choice", "auto",
                      registry.backend_help(), metavar="NAME", repeat=True,
                      choices_of=registry.choices,
                      ini_help=registry.ini_help())
REBUILD_OPT = _opt("--trt-rebuild", None, "bool", False,
                      "ignore engine-cache hits and build again (needs --trt-engine-build)")
CACHE_DIR_OPT = _opt("--trt-cache-dir", "trt_cache_dir", "path", ".trt_cache",
                        "engine cache folder (default: .trt_cache under the rootdir; pytest collects no tests in it)",
                        metavar="DIR", repeat=True, ini_help="engine cache folder")
GOLDEN_DIR_OPT = _opt("--trt-golden-dir", "trt_golden_dir", "path", "golden",
                         "folder of golden HDF5 files, one per model (default: ini trt_golden_dir or 'golden')",
                         metavar="DIR", repeat=True, ini_help="folder of golden HDF5 files")
UPDATE_GOLDEN_OPT = _opt("--trt-update-golden", None, "bool", False,
                            "write new golden snapshots instead of comparing; needs --trt-approve")
APPROVE_OPT = _opt("--trt-approve", None, "text", None,
                      "reason recorded with every snapshot written by --trt-update-golden "
                      "(e.g. 'TRT 10.13 upgrade, CR-1234')", metavar="REASON")
APPROVE_REPORT_OPT = _opt("--trt-approve-report", None, "path", None,
                             "with --trt-approve: the upgrade report (pytest-trt upgrade-report) the approval was "
                             "made on; its sha256 is recorded in APPROVALS.jsonl and the golden's history",
                             metavar="HTML")
APPROVE_KEY_OPT = _opt("--trt-approve-key", "trt_approve_key", "path", None,
                       "SSH private key (or the .pub of an agent key) that signs the approvals of "
                       "--trt-approve with ssh-keygen -Y sign (default, where ini trt_approvers is set: git config "
                       "user.signingkey with gpg.format = ssh)", metavar="KEY",
                       ini_help="SSH key that signs approvals")
APPROVERS_OPT = _opt(None, "trt_approvers", "path", None,
                     "OpenSSH allowed-signers file of the people who may approve goldens (principals = e-mail, "
                     "namespaces=\"pytest-trt-approval\"), reviewed in the repository, e.g. approvers.allowed_signers")
REQUIRE_SIGNED_OPT = _opt(None, "trt_require_signed_approval", "bool", False,
                          "a golden whose current generation has no valid approval signature by an allowed signer "
                          "(trt_approvers) fails its check")
APPROVALS_REQUIRED_OPT = _opt(None, "trt_approvals_required", "text", "1",
                              "distinct allowed signers each golden generation needs (2: two-person rule; the "
                              "change author counts once; the second signs with pytest-trt golden approve)")
PROVENANCE_OPT = _opt("--trt-golden-provenance", "trt_golden_provenance", "choice", "compare",
                         "a golden of another backend version, device or config: 'compare' it anyway and report "
                         "the differences (default: ini trt_golden_provenance or 'compare'), or 'fail'",
                         choices=PROVENANCE_CHOICES, ini_help="golden provenance policy: compare or fail")
PROVENANCE_FAIL_ON_OPT = _opt(None, "trt_golden_provenance_fail_on", "args", (),
                                 "provenance fields that fail a golden check even under 'compare': backend, "
                                 "backend_version, device, config_hash, onnx_sha256")
BUNDLE_DIR_OPT = _opt("--trt-bundle-dir", "trt_bundle_dir", "path", "trt-bundles",
                         "folder for audit bundles (default: trt-bundles under the rootdir; pytest collects no tests "
                         "in it)", metavar="DIR", repeat=True, ini_help="audit bundle folder")
SIGN_KEY_OPT = _opt("--trt-sign-key", "trt_sign_key", "path", None,
                       "Ed25519 or ECDSA P-256 private key (PEM or OpenSSH) that signs every bundle's manifest "
                       "and its attestations", metavar="KEY")
ATTEST_OPT = _opt(None, "trt_attest", "bool", True,
                     "write in-toto attestations (<bundle>.intoto.jsonl) and a CycloneDX ML-BOM (<bundle>.cdx.json) "
                     "beside every bundle (needs the 'attest' extra)")
PINS_OPT = _opt("--trt-pins", "trt_pins", "path", None,
                   "version pins file: the session fails at start when the toolchain or device differs",
                   metavar="TOML")
BUNDLE_ENGINE_OPT = _opt(None, "trt_bundle_engine", "bool", True,
                            "put engine.plan into bundles (false: its sha256 only)")
BUNDLE_HOSTNAME_OPT = _opt(None, "trt_bundle_hostname", "bool", False, "record the host name in environment.json")
MEASURE_NOISE_OPT = _opt(None, "trt_golden_measure_noise", "bool", True,
                         "measure an engine's noise against its unoptimized reference at each approval "
                         "(--trt-update-golden), for tolerance=\"measured\" and the failure lines; false skips it "
                         "(an approval of a large model then takes about a third of the time, and records why)")
REQUIRE_DETERMINISTIC_OPT = _opt(None, "trt_require_deterministic_build", "bool", False,
                                 "fail the test when a rebuild (--trt-rebuild) of a cached engine gives another "
                                 "engine for the same pinned config (other bytes, tactics or layer list); without "
                                 "it the difference is reported")
DEVICES_OPT = _opt("--trt-devices", "trt_devices", "text", None,
                      "GPUs the pytest-xdist workers take round-robin, e.g. '0,1' "
                      "(default: every visible GPU); each worker sees only its own", metavar="IDS",
                      ini_help="GPUs for the pytest-xdist workers, e.g. 0,1")
CATALOG_OPT = _opt("--trt-catalog", "trt_catalog", "bool", False,
                      "index every bundle the session writes into <bundle dir>/catalog.sqlite",
                      ini_help="index written bundles as with --trt-catalog")
MLFLOW_URI_OPT = _opt("--trt-mlflow-uri", "trt_mlflow_uri", "text", None,
                         "also log each bundle to this MLflow tracking server (implies --trt-catalog)", metavar="URI",
                         ini_help="MLflow tracking URI bundles are logged to")
MLFLOW_REGISTER_OPT = _opt("--trt-mlflow-register", "trt_mlflow_register", "bool", False,
                              "also register each engine as an MLflow model version (needs --trt-mlflow-uri)",
                              ini_help="register engines as MLflow model versions")

def _flag(option: Option) -> str:
    assert option.flag is not None
    return option.flag


def _ini(option: Option) -> str:
    assert option.ini is not None
    return option.ini


#: every option, in help order
OPTIONS: tuple[Option, ...] = (
    ENGINE_BUILD_OPT, BACKEND_OPT, REBUILD_OPT, CACHE_DIR_OPT,
    GOLDEN_DIR_OPT, UPDATE_GOLDEN_OPT, APPROVE_OPT, PROVENANCE_OPT, PROVENANCE_FAIL_ON_OPT,
    APPROVE_REPORT_OPT, MEASURE_NOISE_OPT, APPROVE_KEY_OPT, APPROVERS_OPT, REQUIRE_SIGNED_OPT, APPROVALS_REQUIRED_OPT,
    BUNDLE_DIR_OPT, BUNDLE_ENGINE_OPT, BUNDLE_HOSTNAME_OPT, SIGN_KEY_OPT, ATTEST_OPT, PINS_OPT,
    REQUIRE_DETERMINISTIC_OPT,
    DEVICES_OPT, CATALOG_OPT, MLFLOW_URI_OPT, MLFLOW_REGISTER_OPT,
)

# The flag and ini names as constants, for messages and tests (taken from the table).
ENGINE_BUILD = _flag(ENGINE_BUILD_OPT)
BACKEND = _flag(BACKEND_OPT)
REBUILD = _flag(REBUILD_OPT)
CACHE_DIR = _flag(CACHE_DIR_OPT)
GOLDEN_DIR = _flag(GOLDEN_DIR_OPT)
UPDATE_GOLDEN = _flag(UPDATE_GOLDEN_OPT)
APPROVE = _flag(APPROVE_OPT)
APPROVE_REPORT = _flag(APPROVE_REPORT_OPT)
APPROVE_KEY = _flag(APPROVE_KEY_OPT)
PROVENANCE = _flag(PROVENANCE_OPT)
BUNDLE_DIR = _flag(BUNDLE_DIR_OPT)
SIGN_KEY = _flag(SIGN_KEY_OPT)
PINS = _flag(PINS_OPT)
DEVICES = _flag(DEVICES_OPT)
CATALOG = _flag(CATALOG_OPT)
MLFLOW_URI = _flag(MLFLOW_URI_OPT)
MLFLOW_REGISTER = _flag(MLFLOW_REGISTER_OPT)
INI_ENGINE_BUILD = _ini(ENGINE_BUILD_OPT)
INI_BACKEND = _ini(BACKEND_OPT)
INI_CACHE_DIR = _ini(CACHE_DIR_OPT)
INI_GOLDEN_DIR = _ini(GOLDEN_DIR_OPT)
INI_PROVENANCE = _ini(PROVENANCE_OPT)
INI_APPROVE_KEY = _ini(APPROVE_KEY_OPT)
INI_APPROVERS = _ini(APPROVERS_OPT)
INI_REQUIRE_SIGNED = _ini(REQUIRE_SIGNED_OPT)
INI_APPROVALS_REQUIRED = _ini(APPROVALS_REQUIRED_OPT)
INI_PROVENANCE_FAIL_ON = _ini(PROVENANCE_FAIL_ON_OPT)
INI_BUNDLE_DIR = _ini(BUNDLE_DIR_OPT)
INI_SIGN_KEY = _ini(SIGN_KEY_OPT)
INI_PINS = _ini(PINS_OPT)
INI_BUNDLE_ENGINE = _ini(BUNDLE_ENGINE_OPT)
INI_BUNDLE_HOSTNAME = _ini(BUNDLE_HOSTNAME_OPT)
INI_ATTEST = _ini(ATTEST_OPT)
INI_MEASURE_NOISE = _ini(MEASURE_NOISE_OPT)
INI_REQUIRE_DETERMINISTIC = _ini(REQUIRE_DETERMINISTIC_OPT)
INI_DEVICES = _ini(DEVICES_OPT)
INI_CATALOG = _ini(CATALOG_OPT)
INI_MLFLOW_URI = _ini(MLFLOW_URI_OPT)
INI_MLFLOW_REGISTER = _ini(MLFLOW_REGISTER_OPT)
#: ini key of golden threshold ``x`` is ``trt_golden_x`` (the family is declared by pytest_trt.compare.thresholds)
THRESHOLD_INI_PREFIX = "trt_golden_"

DEFAULT_CACHE_DIR = CACHE_DIR_OPT.default
DEFAULT_GOLDEN_DIR = GOLDEN_DIR_OPT.default
DEFAULT_BUNDLE_DIR = BUNDLE_DIR_OPT.default

#: options that take a path: in ``--opt VALUE`` form pytest may count VALUE when choosing the rootdir
PATH_OPTIONS = tuple(o.flag for o in OPTIONS if o.kind == "path" and o.flag is not None)

MARKER = "trt"
MARKER_HELP = (
    "trt(config): the BuildConfig whose engine the test's trt_engine fixture provides; "
    "built with --trt-engine-build, else taken from the engine cache"
)
#: the fixture a golden check takes its engine from
ENGINE_FIXTURE = "trt_engine"
#: the golden check fixture (a test asking for it has its golden hashed early)
GOLDEN_FIXTURE = "trt_golden"


# -- pytest --------------------------------------------------------------------------------------


def add_to_pytest(parser: Any, options: Iterable[Option] = OPTIONS) -> None:
    """Declare ``options`` on pytest's parser (flags in the ``trt`` group, ini keys)."""
    group = parser.getgroup("trt", "TensorRT engine regression testing (pytest-trt)")
    for option in options:
        if option.flag is not None:
            kwargs: dict[str, Any] = {"dest": option.dest, "help": option.help}
            if option.kind == "bool":
                kwargs["action"] = "store_true"
            else:
                kwargs["default"] = None
                if option.metavar:
                    kwargs["metavar"] = option.metavar
                if option.current_choices():
                    kwargs["choices"] = option.current_choices()
            group.addoption(option.flag, **kwargs)
        if option.ini is not None:
            ini_type = {"bool": "bool", "args": "args"}.get(option.kind, "string")
            default = option.default if option.kind in ("bool", "args") else (option.default or "")
            text = option.ini_help or option.help
            if option.kind == "path":
                text += " (relative to the rootdir)"
            parser.addini(option.ini, text, type=ini_type, default=list(default) if ini_type == "args" else default)


def value(config: Any, option: Option) -> Any:
    """The setting after command line and ini are merged: the command line wins, then the ini, then the default."""
    given = config.getoption(option.dest) if option.flag is not None else None
    if given not in (None, False, ""):
        return given
    if option.ini is None:
        return option.default
    ini = config.getini(option.ini)
    if option.kind == "bool":
        return bool(ini)
    if option.kind == "args":
        return tuple(str(x) for x in ini)
    text = str(ini).strip()
    return text if text else option.default


def given_on_command_line(config: Any, option: Option) -> Any:
    """The command-line value, None when the option was not given there."""
    if option.flag is None:
        return None
    given = config.getoption(option.dest)
    return None if given in (None, False, "") else given


def resolve(text: str | os.PathLike[str], base: Path) -> Path:
    """The path rule for one value: ``~`` expanded, relative paths joined to ``base``, ``..`` folded."""
    p = Path(os.path.expanduser(os.fspath(text)))
    return p if p.is_absolute() else Path(os.path.normpath(Path(base) / p))


def path(config: Any, option: Option) -> Path | None:
    """A path option under the path rule (command line: the invocation folder; ini: the rootdir)."""
    assert option.kind == "path", option
    given = given_on_command_line(config, option)
    if given is not None:
        return resolve(str(given), Path(config.invocation_params.dir))
    text = str(config.getini(option.ini) or "").strip() if option.ini is not None else ""
    text = text or (option.default or "")
    return resolve(text, Path(config.rootpath)) if text else None


def repeated_args(config: Any, options: Iterable[Option] = OPTIONS) -> tuple[str, ...]:
    """The options given on this command line that printed commands must repeat, each as :meth:`Option.arg`."""
    out = []
    for option in options:
        given = given_on_command_line(config, option) if option.repeat else None
        if given is not None:
            out.append(option.arg(given))
    return tuple(out)


def flag_value(config: Any, option: Option) -> bool:
    """A switch that the command line or the ini turns on."""
    return bool(value(config, option))


# -- argparse (pytest-trt commands) --------------------------------------------------------------


def add_argument(parser: Any, option: Option, *flags: str, help: str | None = None, **kwargs: Any) -> Any:  # noqa: A002
    """Declare ``option`` on an argparse parser of a ``pytest-trt`` command, under ``flags``
    (default: its pytest flag), with its help, metavar, type and choices."""
    names: Sequence[str] = flags or ((option.flag,) if option.flag else ())
    kw: dict[str, Any] = {"help": help or option.help}
    if option.kind == "bool":
        kw["action"] = "store_true"
    else:
        if option.metavar:
            kw["metavar"] = option.metavar
        if option.current_choices():
            kw["choices"] = option.current_choices()
        if option.kind == "path":
            kw["type"] = Path
    kw.update(kwargs)
    return parser.add_argument(*names, **kw)


@dataclass(frozen=True)
class Options:
    """The engine settings after command line and ini are merged (command line wins)."""

    engine_build: bool
    backend: str
    rebuild: bool
    cache_dir: Path

    @classmethod
    def from_pytest(cls, config: Any) -> Options:
        backend = str(value(config, BACKEND_OPT) or "auto")
        choices = BACKEND_OPT.current_choices()
        if backend not in choices:
            import pytest

            raise pytest.UsageError(
                f"{INI_BACKEND} = {backend!r} is not a backend; choose one of {', '.join(choices)}"
            )
        cache_dir = path(config, CACHE_DIR_OPT)
        assert cache_dir is not None  # it has a default
        return cls(
            engine_build=flag_value(config, ENGINE_BUILD_OPT),
            backend=backend,
            rebuild=flag_value(config, REBUILD_OPT),
            cache_dir=cache_dir,
        )
