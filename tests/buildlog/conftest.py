"""Fixtures of the build-record tests: the log corpus and small live TensorRT-RTX builds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.artifact import LogEntry
from pytest_trt.buildlog import BuildRecord, parse_entries, read_log

CORPUS = Path(__file__).resolve().parents[1] / "data" / "trt_logs"


@pytest.fixture(scope="session")
def corpus() -> Path:
    return CORPUS


_LOGGER: Any = None  # TensorRT keeps one process-global logger: a second Builder's logger is ignored


def _logger(trt: Any) -> Any:
    global _LOGGER
    if _LOGGER is None:
        names = {
            trt.ILogger.Severity.INTERNAL_ERROR: "INTERNAL_ERROR", trt.ILogger.Severity.ERROR: "ERROR",
            trt.ILogger.Severity.WARNING: "WARNING", trt.ILogger.Severity.INFO: "INFO",
            trt.ILogger.Severity.VERBOSE: "VERBOSE",
        }

        class Capture(trt.ILogger):  # type: ignore[misc, name-defined]
            def __init__(self) -> None:
                trt.ILogger.__init__(self)
                self.entries: list[LogEntry] = []

            def log(self, severity: Any, msg: str) -> None:
                self.entries.append(LogEntry(names.get(severity, "INFO"), 0.0, msg))

        _LOGGER = Capture()
    return _LOGGER


@pytest.fixture(scope="session")
def rtx_build() -> Callable[..., BuildRecord]:
    """Build an ONNX model with TensorRT-RTX on the CPU (DETAILED) and parse the captured messages."""
    trt = pytest.importorskip("tensorrt_rtx")
    cache: dict[tuple[bytes, tuple[int, ...]], BuildRecord] = {}

    def build(model: Any, shape: tuple[Any, ...], *, onnx: Any = None) -> BuildRecord:
        """``shape``: one static input shape, or a (min, opt, max) profile of shapes."""
        data = model.SerializeToString()
        profile_shapes = shape if isinstance(shape[0], tuple) else (shape, shape, shape)
        if (data, shape) in cache and onnx is None:
            return cache[data, shape]
        logger = _logger(trt)
        logger.entries = []
        builder = trt.Builder(logger)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, logger)
        assert parser.parse(data), [str(parser.get_error(i)) for i in range(parser.num_errors)]
        config = builder.create_builder_config()
        config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
        profile = builder.create_optimization_profile()
        profile.set_shape(network.get_input(0).name, *profile_shapes)
        config.add_optimization_profile(profile)
        assert builder.build_serialized_network(network, config) is not None
        record = parse_entries(logger.entries, onnx=onnx)
        if onnx is None:
            cache[data, shape] = record
        return record

    return build


@pytest.fixture(scope="module")
def rtx17(corpus: Path) -> BuildRecord:
    """The record of the committed TensorRT-RTX 1.7.1 build log of the example MobileNetV2."""
    return read_log(corpus / "log_rtx1.7.1_mobilenet_v2_detailed.txt")
