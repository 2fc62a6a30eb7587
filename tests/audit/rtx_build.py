"""Real TensorRT-RTX builds for the audit tests, without the foundation's backend.

TensorRT keeps one process-global logger, so one capturing logger instance
serves every build in the process; each build takes the messages logged
since it started.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from typing import Any

from pytest_trt.artifact import BuildResult, LogEntry

_SEVERITIES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
_LOGGER: Any = None


def _logger() -> Any:
    global _LOGGER
    if _LOGGER is None:
        import tensorrt_rtx as trt

        class Capture(trt.ILogger):  # type: ignore[misc]
            def __init__(self) -> None:
                trt.ILogger.__init__(self)
                self.entries: list[LogEntry] = []
                self.t0 = time.perf_counter()

            def log(self, severity: Any, msg: str) -> None:
                name = getattr(severity, "name", str(severity))
                sev = name if name in _SEVERITIES else "INFO"
                self.entries.append(LogEntry(sev, time.perf_counter() - self.t0, msg))

        _LOGGER = Capture()
    return _LOGGER


def build_mobilenet(
    *, name: str = "mobilenet_v2", version: str = "1.2.3", opt_level: int | None = None, max_batch: int = 32
) -> BuildResult:
    """Build ``examples.models.mobilenet_v2()`` on the CPU with TensorRT-RTX; a real BuildResult."""
    from examples.models import mobilenet_v2

    return build_rtx(mobilenet_v2(), name=name, version=version, opt_level=opt_level, max_batch=max_batch)


def build_small() -> BuildResult:
    """Build ``examples.models.conv_bn_relu()`` (3x16x16 input): the smallest real engine, for byte-level tests."""
    from examples.models import conv_bn_relu

    return build_rtx(conv_bn_relu(), name="conv_bn_relu", version="1", max_batch=2, hw=16)


def build_rtx(
    model: Any, *, name: str, version: str, opt_level: int | None = None, max_batch: int = 32, hw: int = 32
) -> BuildResult:
    """Build an ONNX ``model`` with one NCHW input named ``input`` (``hw`` x ``hw``) with TensorRT-RTX."""
    import tensorrt_rtx as trt

    onnx_bytes = model.SerializeToString()
    logger = _logger()
    logger.entries = []
    logger.t0 = time.perf_counter()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    t_parse = time.perf_counter()
    assert parser.parse(onnx_bytes), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    parse_s = time.perf_counter() - t_parse
    config = builder.create_builder_config()
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if opt_level is not None:
        config.builder_optimization_level = opt_level
    profile = builder.create_optimization_profile()
    opt = min(8, max_batch)
    profile.set_shape("input", (1, 3, hw, hw), (opt, 3, hw, hw), (max_batch, 3, hw, hw))
    config.add_optimization_profile(profile)
    t_build = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    assert plan is not None, "build failed"
    build_s = time.perf_counter() - t_build
    pinned = {
        "name": name, "version": version, "onnx": f"models/{name}.onnx", "precision": "typed",
        "builder_optimization_level": opt_level,
        "profiles": [{"input": {"min": [1, 3, hw, hw], "opt": [opt, 3, hw, hw], "max": [max_batch, 3, hw, hw]}}],
    }
    effective = {**pinned, "builder_optimization_level": config.builder_optimization_level}
    onnx_sha = hashlib.sha256(onnx_bytes).hexdigest()
    config_hash = hashlib.sha256((json.dumps(pinned, sort_keys=True) + onnx_sha).encode()).hexdigest()
    return BuildResult(
        backend="tensorrt-rtx",
        engine=bytes(plan),
        log=tuple(logger.entries),
        config=pinned,
        effective_config=effective,
        config_hash=config_hash,
        onnx_sha256=onnx_sha,
        durations={"parse": parse_s, "build": build_s},
        versions={"backend": "tensorrt-rtx", "tensorrt_rtx": trt.__version__,
                  "onnx_parser": str(trt.get_nv_onnx_parser_version()), "python": platform.python_version()},
        device={"kind": "cpu-aot", "name": None, "compute_capability": None, "targets": ["default"]},
        backend_version=trt.__version__,
    )
