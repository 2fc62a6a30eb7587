"""The backend protocols: a Backend builds engines, a Runner executes one.

Which backends exist, and how ``--trt-backend`` picks one, is
:mod:`pytest_trt.backends.registry`.  A backend turns a
:class:`~pytest_trt.backends.request.BuildRequest` (a validated
:class:`~pytest_trt.config.BuildConfig` and everything computed about it) into a
:class:`~pytest_trt.artifact.BuildResult` (engine bytes plus evidence), reads a
:class:`~pytest_trt.buildlog.record.BuildRecord` out of it, and, where the
machine can execute the engine, gives a :class:`Runner`.  Backends import
their heavy library lazily: loading the plugin imports none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.request import BuildRequest
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig


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


class RunnerTensors:
    """The ``inputs``/``outputs`` of a :class:`Runner`, as its constructor read them from the engine or session."""

    _inputs: tuple[TensorSpec, ...]
    _outputs: tuple[TensorSpec, ...]

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self._inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self._outputs


class Backend(Protocol):
    name: str

    def version(self) -> str:
        """The backend library's version (``1.7.1.116``), from package metadata (registry.BackendBase)."""

    def versions(self) -> dict[str, str]:
        """Every version that can change an engine and enters its cache key (registry.key_versions)."""

    def device(self, config: BuildConfig) -> dict[str, Any]:
        """Identity of the build target, part of the cache key."""

    def validate(self, config: BuildConfig) -> None:
        """Raise :class:`~pytest_trt.errors.UnsupportedOption` for anything this backend cannot honour."""

    def build(self, request: BuildRequest) -> BuildResult:
        """Build the engine of a request this backend made (``BuildRequest.create``).

        Raise :class:`~pytest_trt.errors.BuildFailed` with the log kept on failure.
        """

    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        """The structured facts of a build."""

    def runner(self, result: BuildResult, config: BuildConfig) -> Runner:
        """A runner for the engine; raise :class:`~pytest_trt.errors.EngineNotRunnable` with the exact reason."""
