"""Exceptions raised by pytest-trt.

User-caused problems (bad ONNX, missing golden, unsupported option, tampered
bundle) are :class:`TrtError` subclasses and carry their context as
attributes; internal bugs are ordinary exceptions.  The pytest layer turns a
``TrtError`` into a short failure message without an internal traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


class TrtError(Exception):
    """Base class of every error a user can cause and fix."""

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context


class ConfigError(TrtError, ValueError):
    """A BuildConfig field is invalid; ``field`` names it."""

    def __init__(self, message: str, *, field: str, **context: Any) -> None:
        super().__init__(message, field=field, **context)
        self.field = field


class BackendUnavailable(TrtError):
    """The requested backend cannot be imported or used here."""

    def __init__(self, message: str, *, backend: str, **context: Any) -> None:
        super().__init__(message, backend=backend, **context)
        self.backend = backend


class UnsupportedOption(TrtError, ValueError):
    """A config asks for something this backend version cannot honour."""

    def __init__(self, message: str, *, backend: str, option: str, **context: Any) -> None:
        super().__init__(message, backend=backend, option=option, **context)
        self.backend = backend
        self.option = option


class BuildFailed(TrtError):
    """Parsing or building an engine failed: ``BuildFailed(message, config_name=..., stage=..., **context)``.

    ``log_path`` points at the saved build log once one was written (the provider sets it), so the
    evidence of a failed build is never lost.
    """

    log_path: Path | None = None

    @property
    def config_name(self) -> str:
        return str(self.context["config_name"])

    @property
    def stage(self) -> str:
        """``parse``, ``build``, ``calibration``, ``reference`` ..."""
        return str(self.context["stage"])

    def __str__(self) -> str:
        if self.log_path is not None:
            return f"{self.message}\nFull build log: {self.log_path}"
        return self.message


class EngineNotRunnable(TrtError):
    """The engine was built but cannot be executed on this machine."""


class InputMismatch(TrtError, ValueError):
    """Inputs given to ``Engine.run`` do not match what the engine expects."""


class CacheCorrupt(TrtError):
    """A cache entry failed its integrity check (it is rebuilt, never used)."""


class FolderUnusable(TrtError):
    """A folder pytest-trt reads or writes (cache, goldens, bundles) is a file, read-only or missing."""

    def __init__(self, message: str, *, path: Path | str, **context: Any) -> None:
        super().__init__(message, path=str(path), **context)
        self.path = Path(path)


class GoldenError(TrtError):
    """Base class of golden-snapshot problems."""


class GoldenMissing(GoldenError):
    """No golden snapshot exists for this config."""


class GoldenTainted(GoldenError):
    """The golden snapshot was made under different provenance."""


class GoldenCorrupt(GoldenError):
    """A golden file cannot be read (corrupt, truncated, wrong layout)."""


class GoldenUnapproved(GoldenError):
    """A golden generation lacks the valid approval signatures the project requires (signed approvals)."""


class BundleIntegrityError(TrtError):
    """An audit bundle failed verification (hash, signature or unsafe member)."""


class LogParseError(TrtError):
    """A build log or layer JSON file cannot be read at all."""


class AssertionContextError(TrtError):
    """A module-level assertion cannot tell which engine to use."""


class CalibrationCacheError(LogParseError):
    """A calibration cache is malformed (strict reading); ``line`` is the 1-based line number."""

    def __init__(self, message: str, *, path: str, line: int) -> None:
        super().__init__(message, path=path, line=line)
        self.line = line


class UnknownNodeError(AssertionError):
    """A node name (or pattern) matches no ONNX node of the record (a test failure, not an error)."""

    def __init__(self, message: str, *, name: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.name = name
        self.candidates = tuple(candidates)


class EngineNotBuilt(TrtError):
    """The engine is not cached and building was not requested."""


class LockTimeout(TrtError):
    """A file lock was not free in time; ``what`` names the locked object, ``lock_file`` the lock."""

    @property
    def what(self) -> str:
        return str(self.context["what"])

    @property
    def lock_file(self) -> Path:
        return Path(self.context["lock_file"])


class GoldenRegression(GoldenError, AssertionError):
    """Outputs or structure moved beyond the allowed thresholds (a test failure, not an error)."""


class CatalogError(TrtError):
    """The catalog database cannot be used (newer schema, not a database, unwritable)."""


class MonitorError(TrtError, ValueError):
    """A monitor spec that cannot be used (unreadable, edited by hand, of another schema) or outputs that do not fit
    it; ``path`` names the spec file when there is one."""

    def __init__(self, message: str, *, path: str | None = None, **context: Any) -> None:
        super().__init__(message, path=path, **context)
        self.path = path


class MlflowUnavailable(ImportError):
    """mlflow is not installed."""


class SigningUnavailable(ImportError):
    """``cryptography`` is not installed."""


class KeyFileError(ValueError):
    """A key file cannot be read as an Ed25519 or ECDSA P-256 key (the message says why)."""


class PinsError(ValueError):
    """The pins file cannot be read or has unknown keys / wrong types."""


class SchemaError(ValueError):
    """A JSON member of a bundle holds a value of the wrong type; ``where`` is its dotted path."""

    def __init__(self, where: str, why: str) -> None:
        super().__init__(f"{where}: {why}")
        self.where = where


class ArchiveError(ValueError):
    """The file is not a readable tar.gz, or breaks a limit; the message says which and how."""


class UnsafeMember(ValueError):
    """A tar member that is not a flat regular file; ``member`` names it."""

    def __init__(self, member: str, why: str) -> None:
        super().__init__(f"{member!r}: {why}")
        self.member = member
        self.why = why


class PairingError(Exception):
    """An upgrade-review run cannot be read (no such path, nothing in it, a bundle that fails verification)."""


class ReportReferenceError(ValueError):
    """The upgrade report file given to an approval cannot be read."""


class CommandInputError(Exception):
    """A file or path given to a ``pytest-trt`` command cannot be used; the message is the one line shown (exit 3)."""


class CommandUsageError(Exception):
    """Arguments of a ``pytest-trt`` command that cannot work together; the message is the one line shown (exit 2)."""


class GoldenStructureWarning(UserWarning):
    """A golden check's engine structure differs from the golden's and the test asked for ``structure="warn"``."""


class ApprovalLogWarning(UserWarning):
    """``APPROVALS.jsonl`` holds a torn or unreadable line (kept in the file, skipped by readers)."""
