"""A note in the bundle folder when a build fails, so an upgrade report can say "could not build on OLD".

A failed build leaves no engine and so no bundle; without this note the
config would look merely absent from that run.  The note is small JSON,
written atomically, named ``<name>-v<version>-<backend>.build-failed.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pytest_trt.common.fileio import write_json_atomic

#: the note's file name ends so; ``pytest-trt upgrade-report`` reads such notes as "could not build"
FAILED_SUFFIX = ".build-failed.json"


def _version(backend: str | None) -> str:
    from pytest_trt.backends import registry

    if registry.find(backend) is None:
        return "unknown"
    return registry.installed_version(str(backend)) or "unknown"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text) or "unknown"


def failure_note(config: Any, exc: Any, *, backend: str | None, test: str) -> dict[str, Any]:
    """The JSON document of one failed build (``config`` a BuildConfig, ``exc`` a BuildFailed or the
    UnsupportedOption of a release that refuses the config, e.g. TensorRT-RTX 1.4 and INT8 Q/DQ)."""
    option = getattr(exc, "option", None)
    return {
        "schema": 1,
        "kind": "build-failed",
        "config": {"name": str(getattr(config, "name", getattr(exc, "config_name", "unknown"))),
                   "version": str(getattr(config, "version", ""))},
        "backend": backend or "unknown",
        "backend_version": _version(backend),
        "stage": getattr(exc, "stage", None) or f"refused option {option}",
        "message": exc.message,
        "test": test,
    }


def write_failure_note(folder: Path, note: dict[str, Any]) -> Path:
    """Write ``note`` into ``folder`` (created when missing); return its path."""
    config = note["config"]
    name = f"{_safe(config['name'])}-v{_safe(config['version'])}-{_safe(note['backend'])}{FAILED_SUFFIX}"
    path = Path(folder) / name
    write_json_atomic(path, note, indent=1)
    return path


def note_build_failure(item: Any, exc: BaseException, *, folder: Path, backend: str | None) -> Path | None:
    """Write the note when ``exc`` is a BuildFailed (or the backend's UnsupportedOption refusal) of the test's
    ``@pytest.mark.trt`` config."""
    from pytest_trt.errors import BuildFailed, UnsupportedOption

    if not isinstance(exc, (BuildFailed, UnsupportedOption)):
        return None
    marker = item.get_closest_marker("trt")
    config = (marker.args[0] if marker.args else marker.kwargs.get("config")) if marker else None
    return write_failure_note(folder, failure_note(config, exc, backend=backend, test=item.nodeid))
