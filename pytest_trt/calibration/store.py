"""Where explicit calibrations are stored: ``<engine cache>/calibration`` in a pytest session.

Kept apart so the engine provider can set it without importing numpy or ONNX Runtime.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_ROOT: list[Path] = []


def set_store_root(root: Path | None) -> None:
    """Store explicit calibrations under ``root`` (None: the default)."""
    _ROOT[:] = [Path(root)] if root is not None else []


def store_root() -> Path:
    """The store folder: as set, else ``$PYTEST_TRT_CALIBRATION_DIR``, else ``<tmp>/pytest-trt-calibration``."""
    if _ROOT:
        return _ROOT[0]
    env = os.environ.get("PYTEST_TRT_CALIBRATION_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / "pytest-trt-calibration"
