"""The backend protocol, and how ``--trt-backend`` picks one.

A backend turns a :class:`~pytest_trt.config.BuildConfig` into a
:class:`~pytest_trt.artifact.BuildResult` (engine bytes plus evidence), reads a
:class:`~pytest_trt.buildlog.record.BuildRecord` out of it, and, where the
machine can execute the engine, gives a :class:`Runner`.  Backends import
their heavy library lazily: loading the plugin imports none of them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_trt.errors import BackendUnavailable

if TYPE_CHECKING:
    import numpy as np

    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig

BACKEND_NAMES = ("tensorrt", "tensorrt-rtx", "onnxruntime")
#: ``auto`` tries these in order
AUTO_ORDER = ("tensorrt", "tensorrt-rtx", "onnxruntime")
_MODULES = {"tensorrt": "tensorrt", "tensorrt-rtx": "tensorrt_rtx", "onnxruntime": "onnxruntime"}


@dataclass(frozen=True)
class TensorSpec:
    """An engine input or output: name, numpy dtype name, shape (-1 for dynamic)."""

    name: str
    dtype: str
    shape: tuple[int, ...]


class Runner(Protocol):
    """Executes one engine on this machine."""

    @property
    def inputs(self) -> tuple[TensorSpec, ...]: ...

    @property
    def outputs(self) -> tuple[TensorSpec, ...]: ...

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


class Backend(Protocol):
    name: str

    def version(self) -> str:
        """The backend library's version (``1.7.1.116``)."""

    def versions(self) -> dict[str, str]:
        """Every version that can change an engine (library, parser, onnx, python)."""

    def device(self, config: BuildConfig) -> dict[str, Any]:
        """Identity of the build target, part of the cache key."""

    def validate(self, config: BuildConfig) -> None:
        """Raise :class:`~pytest_trt.errors.UnsupportedOption` for anything this backend cannot honour."""

    def build(self, config: BuildConfig) -> BuildResult:
        """Build the engine; raise :class:`~pytest_trt.errors.BuildFailed` with the log kept on failure."""

    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        """The structured facts of a build."""

    def runner(self, result: BuildResult, config: BuildConfig) -> Runner:
        """A runner for the engine; raise :class:`~pytest_trt.errors.EngineNotRunnable` with the exact reason."""


def module_available(name: str) -> bool:
    """Whether a backend's library is importable, without importing it."""
    return importlib.util.find_spec(_MODULES[name]) is not None


def create_backend(name: str) -> Backend:
    """Instantiate the backend ``name`` (raises BackendUnavailable when its library is missing)."""
    if name not in BACKEND_NAMES:
        raise BackendUnavailable(
            f"unknown backend {name!r}; choose one of auto, {', '.join(BACKEND_NAMES)}", backend=name
        )
    if not module_available(name):
        extra = {"tensorrt": "trt", "tensorrt-rtx": "rtx", "onnxruntime": "ort"}[name]
        raise BackendUnavailable(
            f"backend {name!r} needs the Python module {_MODULES[name]!r}, which is not installed; "
            f"install it with: pip install 'pytest-trt[{extra}]'",
            backend=name,
        )
    if name == "onnxruntime":
        from pytest_trt.backends.onnxruntime import OrtBackend

        return OrtBackend()
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return TensorRTBackend(_MODULES[name])


def choose_backend(requested: str) -> tuple[str, str]:
    """Resolve ``--trt-backend``; return (backend name, why it was chosen)."""
    if requested != "auto":
        return requested, "requested with --trt-backend"
    skipped: list[str] = []
    for name in AUTO_ORDER:
        if module_available(name):
            why = "auto: first importable of " + ", ".join(AUTO_ORDER)
            if skipped:
                why += f" ({', '.join(skipped)} not installed)"
            return name, why
        skipped.append(_MODULES[name])
    raise BackendUnavailable(
        "no backend is installed: install one of tensorrt, tensorrt-rtx or onnxruntime "
        "(pip install 'pytest-trt[rtx]' builds engines on a CPU-only machine)",
        backend="auto",
    )
