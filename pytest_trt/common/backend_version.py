"""The backend library version a ``build.json`` records, as written by any release: the one legacy-version reader
(cache entries, bundles, the catalog and the upgrade review all read it here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def backend_version_of(build: Mapping[str, Any]) -> str:
    """The backend library version a ``build.json`` object records, as written by any release; ``""`` when none.

    The typed ``backend_version`` field first.  Results made before it existed keep the version in
    ``versions``: under the backend's module name (``tensorrt``, ``tensorrt_rtx``), its distribution
    name, ``backend_version`` or ``backend``; the first TensorRT results held the backend's *name*
    under ``backend``, so only a value that starts with a digit is a version.
    """
    typed = build.get("backend_version")
    if typed:
        return str(typed)
    versions = build.get("versions") or {}
    backend = str(build.get("backend") or "")
    for key in (backend.replace("-", "_"), backend, "backend_version", "backend"):
        value = str(versions.get(key) or "")
        if value[:1].isdigit():
            return value
    return ""
