"""Exceptions raised by pytest-trt.

User-caused problems (bad ONNX, missing golden, unsupported option, tampered
bundle) are :class:`TrtError` subclasses and carry their context as
attributes; internal bugs are ordinary exceptions.  The pytest layer turns a
``TrtError`` into a short failure message without an internal traceback.
"""

from __future__ import annotations

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
    """Parsing or building an engine failed.

    ``log_path`` points at the saved build log when one was written, so the
    evidence of a failed build is never lost.
    """

    def __init__(
        self,
        message: str,
        *,
        config_name: str,
        stage: str,
        log_path: Path | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message, config_name=config_name, stage=stage, **context)
        self.config_name = config_name
        self.stage = stage
        self.log_path = log_path

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


class BundleIntegrityError(TrtError):
    """An audit bundle failed verification (hash, signature or unsafe member)."""


class LogParseError(TrtError):
    """A build log or layer JSON file cannot be read at all."""


class AssertionContextError(TrtError):
    """A module-level assertion cannot tell which engine to use."""
