"""A real backend with its calls counted: how often a provider validates, builds and parses records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.base import Backend
    from pytest_trt.backends.request import BuildRequest
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig


class SpyBackend:
    """Wraps ``real`` (any backend): every call goes to it; ``validations``, ``built`` and ``records`` count them.

    ``built`` holds what each ``build`` received (a :class:`~pytest_trt.backends.request.BuildRequest`
    from the provider).  Every other attribute is the real backend's.
    """

    def __init__(self, real: Backend) -> None:
        self.real = real
        self.validations = 0
        self.records = 0
        self.built: list[BuildRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    @property
    def builds(self) -> int:
        """How many times ``build`` ran."""
        return len(self.built)

    def validate(self, config: BuildConfig) -> None:
        self.validations += 1
        self.real.validate(config)

    def build(self, request: BuildRequest) -> BuildResult:
        self.built.append(request)
        return self.real.build(request)

    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        self.records += 1
        return self.real.record(result, config)
