"""The TensorRT-family backend: NVIDIA TensorRT (8.6, 10.x, 11.x) and TensorRT-RTX (1.x), one code path.

Differences between the modules are probed (see :mod:`trt_features`), never
branched on by name, except where a message has to tell the user which
product they run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_trt.artifact import BuildResult
from pytest_trt.backends import registry
from pytest_trt.backends.request import BuildRequest
from pytest_trt.common import hostprobe
from pytest_trt.common.fileio import write_bytes_atomic
from pytest_trt.config import MEMORY_POOLS, BuildConfig
from pytest_trt.errors import BuildFailed, EngineNotRunnable, UnsupportedOption

if TYPE_CHECKING:
    from pytest_trt.backends.base import Runner
    from pytest_trt.backends.registry import BackendSpec
    from pytest_trt.backends.trt_features import Features
    from pytest_trt.buildlog.record import BuildRecord

# One build at a time per process: the TensorRT logger is process-global.
_BUILD_LOCK = threading.Lock()


def create(spec: BackendSpec) -> TensorRTBackend:
    """The registry's factory for the ``tensorrt`` and ``tensorrt-rtx`` rows."""
    return TensorRTBackend(spec.module)


class TensorRTBackend(registry.BackendBase):
    """Builds engines with ``tensorrt`` or ``tensorrt_rtx``.

    Version, versions and device identity come from package metadata and the host probe: a cache
    hit never imports the module (~35 ms); building, validating and running do.
    """

    def __init__(self, module: str = "tensorrt") -> None:
        self.module_name = module
        self.name = registry.name_of_module(module)
        # TensorRT-RTX builds ahead of time for compute capabilities (as Features.is_rtx, without the import)
        self.is_rtx = module == "tensorrt_rtx"

    @functools.cached_property
    def trt(self) -> ModuleType:
        return importlib.import_module(self.module_name)

    @functools.cached_property
    def features(self) -> Features:
        from pytest_trt.backends.trt_features import probe  # the build modules load when a build needs them

        return probe(self.trt)

    def result_versions(self, versions: dict[str, str]) -> dict[str, str]:
        """The versions a build records: the key's, plus the ONNX parser's (the module is loaded by then)."""
        parser = getattr(self.trt, "get_nv_onnx_parser_version", None)
        return versions if parser is None else {**versions, "onnx_parser": str(parser())}

    def device(self, config: BuildConfig) -> dict[str, Any]:
        gpus = hostprobe.gpus()
        gpu = gpus[0] if gpus else None
        ident: dict[str, Any] = {}
        if gpu is not None:
            ident.update(kind="gpu", name=gpu.name, compute_capability=gpu.compute_capability)
        else:
            ident.update(kind="cpu-aot" if self.is_rtx else "none", name=None, compute_capability=None)
        if self.is_rtx:
            # Ahead-of-time builds target compute capabilities, not the local device.
            ident["targets"] = list(config.compute_capabilities) or ["default"]
        return ident

    # -- validation ----------------------------------------------------
    def validate(self, config: BuildConfig) -> None:
        """Refuse, with the reason and the alternative, anything this module cannot honour."""
        from pytest_trt.backends.trt_features import check_precision

        f = self.features
        product = f"{'TensorRT-RTX' if f.is_rtx else 'TensorRT'} {f.version}"

        def refuse(option: str, why: str) -> UnsupportedOption:
            return UnsupportedOption(f"BuildConfig {config.name!r}: {option}: {why}", backend=self.name, option=option)

        registry.check_options(self.name, config, product)
        check_precision(f, config, product, refuse)
        for pool in config.memory_pool_limits:
            if MEMORY_POOLS[pool] not in f.memory_pools:
                raise refuse(f"memory_pool_limits[{pool!r}]", f"{product} has no memory pool {MEMORY_POOLS[pool]}")
        if config.builder_optimization_level is not None and not f.has_optimization_level:
            raise refuse("builder_optimization_level", f"{product} has no builder optimization level (added in 8.6)")
        if config.timing_cache is not None and not f.timing_cache_effective:
            raise refuse(
                "timing_cache",
                f"{product} has no working timing cache (TensorRT-RTX made its timing-cache "
                "calls no-ops in 1.2); remove timing_cache from the config",
            )
        for cc in config.compute_capabilities:
            if cc not in f.compute_capabilities:
                known = [c for c in f.compute_capabilities if c.startswith("SM")]
                why = (
                    f"targets one of {', '.join(known)}"
                    if known
                    else "builds for the GPU it runs on; compute-capability targets are a TensorRT-RTX feature"
                )
                raise refuse(f"compute_capabilities[{cc!r}]", f"{product} {why}")
        level = config.hardware_compatibility_level
        if level is not None and level != "NONE" and f.is_rtx:
            raise refuse(
                "hardware_compatibility_level",
                f"{product} has no hardware-compatibility setting (its API reports get/set as unsupported); "
                "remove hardware_compatibility_level or set it to 'NONE'",
            )
        if level is not None and not f.is_rtx and level not in f.hardware_compatibility_levels:
            raise refuse(
                "hardware_compatibility_level",
                f"{product} knows {', '.join(f.hardware_compatibility_levels) or 'no levels'}, not {level!r}",
            )

    # -- build ---------------------------------------------------------
    def build(self, request: BuildRequest) -> BuildResult:
        """Build a request made by this backend (validated once, when made), with the log captured."""
        from pytest_trt.backends.trt_logger import capture_logger

        if request.backend != self.name:
            raise ValueError(f"a build request for backend {request.backend!r} was given to {self.name!r}")
        trt = self.trt
        logger = capture_logger(trt)
        with _BUILD_LOCK:
            logger.start(convert=True)  # the log is converted on a thread while the build runs
            try:
                result = self._build_locked(request, logger)
            except BuildFailed as exc:
                exc.context.setdefault("log", tuple(logger.stop()))
                raise
            except BaseException:
                logger.stop()
                raise
            return result.with_log(logger.detach())

    def _build_locked(self, request: BuildRequest, logger: Any) -> BuildResult:
        from pytest_trt.backends.onnx_limits import unsupported_reason
        from pytest_trt.backends.trt_apply import configure

        trt, f = self.trt, self.features
        versions = self.result_versions(dict(request.versions))
        config, calibrated = request.config, None
        if config.calibration is not None and not f.calibrators_usable:
            from pytest_trt.calibration.explicit import calibrate_request

            # explicit INT8: the Q/DQ model is built; the result stays under the pinned config
            calibrated = calibrate_request(request)
            config = calibrated.typed
        builder = trt.Builder(logger)
        flags = 0
        if f.use_explicit_batch:
            flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        if config.precision == "typed" and "STRONGLY_TYPED" in f.network_flags:
            flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        network = builder.create_network(flags)
        product = "TensorRT-RTX" if f.is_rtx else "TensorRT"
        too_new = unsupported_reason(config.onnx, module=f.module, version=f.version, product=product)
        if too_new is not None:
            raise BuildFailed(f"BuildConfig {config.name!r}: {too_new}", config_name=config.name, stage="parse")
        parser = trt.OnnxParser(network, logger)
        t0 = time.perf_counter()
        ok = parser.parse_from_file(str(config.onnx))
        parse_s = time.perf_counter() - t0
        if not ok:
            raise self._parse_failure(config, parser)
        if network.num_outputs == 0:
            # protobuf accepts many byte strings as an empty ModelProto, and TensorRT then "parses" it
            raise BuildFailed(
                f"BuildConfig {config.name!r}: {config.onnx} holds no ONNX graph (no outputs after parsing): "
                "it is not an ONNX model, or an empty one. Check it with onnx.checker.check_model.",
                config_name=config.name,
                stage="parse",
            )
        # the pin's builder flags, exactly: its precision's (as validation checked them) and its own
        builder_flags = tuple(sorted(set(f.precision_flags[config.precision]) | set(config.flags)))
        configured = configure(trt, f, builder, network, config, builder_flags)
        builder_config, effective = configured.builder_config, configured.effective
        if config.calibration is not None:  # implicit INT8 (TensorRT <= 10): a calibrator on the config
            from pytest_trt.backends.trt_calibrator import attach_calibrator

            calibrator, effective["calibrator"] = attach_calibrator(  # noqa: F841 - alive during the build
                trt, builder_config, config, configured.profiles)
        t1 = time.perf_counter()
        serialized = builder.build_serialized_network(network, builder_config)
        build_s = time.perf_counter() - t1
        if serialized is None:
            errors = logger.errors_so_far()
            detail = "\n  ".join(errors[-10:]) or "the builder returned no engine and logged no error"
            raise BuildFailed(
                f"BuildConfig {config.name!r}: {self.name} {f.version} failed to build {config.onnx}:\n  {detail}",
                config_name=config.name,
                stage="build",
            )
        if config.calibration is not None:
            from pytest_trt.backends.trt_calibrator import check_pinned_cache

            check_pinned_cache(config)
        extra: dict[str, Any] = {}
        if configured.timing_cache is not None and config.timing_cache is not None:
            timings = bytes(memoryview(builder_config.get_timing_cache().serialize()))
            write_bytes_atomic(config.timing_cache, timings)
            # evidence: the tactic timings the build started from and left (the config hash says only "one is used")
            extra["timing_cache"] = {"sha256_before": configured.timing_cache_sha256,
                                     "sha256_after": hashlib.sha256(timings).hexdigest()}
        # the result keeps the builder's own buffer: the cache writes and hashes it without a copy (103 MB, a ResNet-50,
        # take ~25 ms to copy); it is copied into bytes when the engine is first used
        return BuildResult.built_for(  # the pinned config, also for its Q/DQ model's build
            request, engine=memoryview(serialized), effective=effective, versions=versions,
            durations={"parse": parse_s, "build": build_s}, extra=extra, calibrated=calibrated,
        )

    def _parse_failure(self, config: BuildConfig, parser: Any) -> BuildFailed:
        lines = []
        nodes = []
        for i in range(parser.num_errors):
            err = parser.get_error(i)
            node = _call(err, "node_name") or ""
            op = _call(err, "node_operator") or ""
            index = _call(err, "node")
            where = (
                f"node {node!r} ({op})" if node or op else (f"node #{index}" if index not in (None, -1) else "model")
            )
            nodes.append(node)
            lines.append(f"{where}: {_call(err, 'desc')} [{_call(err, 'code')}]")
        detail = "\n  ".join(lines) or "no parser error recorded"
        return BuildFailed(
            f"BuildConfig {config.name!r}: {self.name} {self.features.version} could not parse {config.onnx}:\n"
            f"  {detail}\n"
            "Check the model with onnx.checker.check_model, or replace the unsupported node.",
            config_name=config.name,
            stage="parse",
            nodes=tuple(n for n in nodes if n),
        )

    # -- after the build -----------------------------------------------
    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        from pytest_trt.buildlog.readers import parse_result
        from pytest_trt.calibration.building import attach
        from pytest_trt.calibration.explicit import built_onnx

        return attach(parse_result(result, onnx=built_onnx(result, config)), result)

    def runner(self, result: BuildResult, config: BuildConfig) -> Runner:
        reason = self.not_runnable_reason()
        if reason is not None:
            raise EngineNotRunnable(f"cannot run {self.name} engine {config.name!r} here: {reason}")
        from pytest_trt.backends.trt_logger import capture_logger
        from pytest_trt.backends.trt_runner import TrtRunner

        return TrtRunner(self.trt, capture_logger(self.trt), result.engine)

    def not_runnable_reason(self) -> str | None:
        """Why engines of this backend cannot execute on this machine, or None."""
        reason = hostprobe.no_gpu_reason()
        if reason is not None:
            return f"{reason}; {self.name} engines need an NVIDIA GPU to run (build-time assertions still work)"
        gpu = hostprobe.gpus()[0]
        if self.features.is_rtx and gpu.sm not in self.features.compute_capabilities:
            supported = ", ".join(c for c in self.features.compute_capabilities if c.startswith("SM"))
            return (
                f"TensorRT-RTX {self.features.version} does not support compute capability "
                f"{gpu.compute_capability} ({gpu.name}); it runs on {supported}"
            )
        for mod in ("cuda", "pycuda"):
            if importlib.util.find_spec(mod) is not None:
                return None
        return "neither cuda-python nor pycuda is installed (pip install 'pytest-trt[gpu]')"


def _call(obj: Any, name: str) -> Any:
    try:
        value = getattr(obj, name)
        return value() if callable(value) else value
    except Exception:
        return None
