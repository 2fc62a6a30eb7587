"""What a :class:`~pytest_trt.artifact.BuildResult` takes from the request it was built for and from an explicit
calibration: typing protocols, so the result's module needs neither the request's nor the calibration's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Calibrated(Protocol):
    """What a result takes from an explicit calibration (``calibration.explicit.ExplicitCalibration``): the pinned
    precision and calibration facts laid over the Q/DQ build's, and the calibration's seconds."""

    @property
    def effective(self) -> Mapping[str, Any]: ...
    @property
    def extra(self) -> Mapping[str, Any]: ...
    @property
    def seconds(self) -> float: ...


class Requested(Protocol):
    """What a result takes from the request it was built for (a :class:`~pytest_trt.backends.request.BuildRequest`)."""

    @property
    def backend(self) -> str: ...
    @property
    def onnx_sha256(self) -> str: ...
    @property
    def config_hash(self) -> str: ...
    @property
    def config_json(self) -> dict[str, Any]: ...
    @property
    def versions(self) -> Mapping[str, str]: ...
    @property
    def device(self) -> Mapping[str, Any]: ...
