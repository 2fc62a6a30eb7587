"""The ``onnxruntime`` backend: an ONNX Runtime session as a CPU "engine".

Building = creating an ``InferenceSession`` under the pinned
:class:`~pytest_trt.config.OrtOptions` with the session's VERBOSE log
captured from file descriptor 2.  The engine artifact is the optimized model
ONNX Runtime saves (``optimized_model_filepath``); a runner loads it with
every optimization disabled, so a cached engine runs exactly the graph that
was recorded, without optimizing again.  An optimized model made at level
``layout``/``all`` may hold NCHWc or NHWC contrib ops only the same ONNX
Runtime build and CPU can load: the cache key carries the ORT version and the
CPU's model name and vector ISA (see :meth:`OrtBackend.device`).

``onnxruntime`` is imported only when a backend method runs.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.artifact import BuildResult, LogEntry
from pytest_trt.backends import registry
from pytest_trt.backends.base import RunnerTensors, TensorSpec
from pytest_trt.backends.fdcapture import FdCapture
from pytest_trt.backends.request import BuildRequest
from pytest_trt.common import hostprobe
from pytest_trt.config import BuildConfig, OrtOptions
from pytest_trt.errors import BackendUnavailable, BuildFailed, UnsupportedOption

if TYPE_CHECKING:
    import numpy as np

    from pytest_trt.backends.registry import BackendSpec
    from pytest_trt.buildlog.record import BuildRecord

__all__ = ["OrtBackend", "OrtRunner", "cpu_identity", "load_session"]

NAME = "onnxruntime"
#: OrtOptions level names -> GraphOptimizationLevel members (ORT_ENABLE_LAYOUT appeared in ORT 1.22)
LEVELS = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
#: BuildConfig fields only a TensorRT builder can honour (unset = None or empty)
TENSORRT_ONLY = (
    "builder_optimization_level",
    "memory_pool_limits",
    "flags",
    "timing_cache",
    "compute_capabilities",
    "hardware_compatibility_level",
)
#: precisions ORT honours: both mean "the ONNX model's own tensor types"
PRECISIONS = ("fp32", "typed")
# ORT type strings -> numpy dtype names
_ORT_TYPES = {
    "tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
    "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(int16)": "int16", "tensor(uint16)": "uint16",
    "tensor(int32)": "int32", "tensor(uint32)": "uint32", "tensor(int64)": "int64", "tensor(uint64)": "uint64",
    "tensor(bool)": "bool", "tensor(string)": "object",
}


def _ort() -> Any:
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - create_backend checks first
        raise BackendUnavailable(
            f"the onnxruntime backend needs the onnxruntime module ({exc}); pip install 'pytest-trt[ort]'",
            backend=NAME,
        ) from None
    return onnxruntime


def cpu_identity() -> dict[str, Any]:
    """CPU model name, machine and vector ISA extensions (:func:`pytest_trt.common.hostprobe.cpu`): in the cache key."""
    cpu = hostprobe.cpu()
    return {"name": cpu.model or cpu.machine or "unknown", "machine": cpu.machine, "isa": cpu.isa}


def create(spec: BackendSpec) -> OrtBackend:
    """The registry's factory for the ``onnxruntime`` row."""
    return OrtBackend()


class OrtRunner(RunnerTensors):
    """Runs one ONNX Runtime session; tensors are described in numpy dtype names."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._inputs = tuple(_spec(a) for a in session.get_inputs())
        self._outputs = tuple(_spec(a) for a in session.get_outputs())
        self._output_names = [o.name for o in self._outputs]

    @property
    def session(self) -> Any:
        """The underlying ``onnxruntime.InferenceSession``."""
        return self._session

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        values = self._session.run(self._output_names, feeds if isinstance(feeds, dict) else dict(feeds))
        return dict(zip(self._output_names, values, strict=True))


def _spec(arg: Any) -> TensorSpec:
    shape = tuple(d if isinstance(d, int) and d >= 0 else -1 for d in (arg.shape or ()))
    return TensorSpec(arg.name, _ORT_TYPES.get(arg.type, arg.type), shape)


def _session_options(opts: OrtOptions, level: str, *, verbose: bool) -> Any:
    ort = _ort()
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    so.intra_op_num_threads = opts.intra_op_threads
    so.inter_op_num_threads = opts.inter_op_threads
    so.use_deterministic_compute = opts.deterministic
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 0 if verbose else 3
    # verbosity gates ORT's VLOG lines (per-node matches of the transformers)
    so.log_verbosity_level = 1 if verbose else 0
    so.logid = "pytest-trt"
    return so


def load_session(model: bytes | str | Path, opts: OrtOptions, *, providers: Sequence[str] | None = None) -> Any:
    """A session on ``model`` with every optimization disabled (a saved engine, or the reference)."""
    ort = _ort()
    source = str(model) if isinstance(model, Path) else model
    so = _session_options(opts, "disabled", verbose=False)
    return ort.InferenceSession(source, so, providers=list(providers or opts.execution_providers))


def _options(config: BuildConfig) -> OrtOptions:
    return config.ort if config.ort is not None else OrtOptions()


class OrtBackend(registry.BackendBase):
    """ONNX Runtime behind the :class:`~pytest_trt.backends.base.Backend` protocol."""

    name = NAME

    def device(self, config: BuildConfig) -> dict[str, Any]:
        return {"kind": "cpu", **cpu_identity(), "providers": list(_options(config).execution_providers)}

    def validate(self, config: BuildConfig) -> None:
        registry.check_options(NAME, config, f"onnxruntime {self.version()}")
        # a calibrated config is run as its Q/DQ model (explicit quantization) in the model's own types
        precision = _explicit_precision(config) if config.calibration is not None else config.precision
        for fld in TENSORRT_ONLY:
            value = getattr(config, fld)
            if value is not None and not (isinstance(value, (tuple, list, Mapping)) and not value):
                raise UnsupportedOption(
                    f"BuildConfig {config.name!r}: {fld}={value!r} is a TensorRT builder setting that ONNX Runtime "
                    f"cannot honour; remove it from this config (or make a separate config for the ONNX Runtime "
                    f"backend), or build with --trt-backend tensorrt / tensorrt-rtx",
                    backend=NAME, option=fld,
                )
        if precision not in PRECISIONS:
            raise UnsupportedOption(
                f"BuildConfig {config.name!r}: precision={precision!r} cannot be applied by ONNX Runtime, "
                f"which computes in the ONNX model's own tensor types; use precision='typed' (or 'fp32') with a "
                f"model already converted to that precision (e.g. quantize it with onnxruntime.quantization for int8)",
                backend=NAME, option="precision",
            )
        opts = _options(config)
        ort = _ort()
        if not hasattr(ort.GraphOptimizationLevel, LEVELS[opts.graph_optimization_level]):
            raise UnsupportedOption(
                f"ort.graph_optimization_level={opts.graph_optimization_level!r} needs a newer onnxruntime than "
                f"{self.version()}; choose 'extended' or 'all', or upgrade onnxruntime",
                backend=NAME, option="ort.graph_optimization_level",
            )
        available = ort.get_available_providers()
        missing = [p for p in opts.execution_providers if p not in available]
        if missing or not opts.execution_providers:
            raise UnsupportedOption(
                f"BuildConfig {config.name!r}: execution provider(s) {', '.join(missing) or '(none)'} not available in "
                f"onnxruntime {self.version()} here (available: {', '.join(available)}); install the onnxruntime "
                f"package that has them, or pin ort.execution_providers to available ones",
                backend=NAME, option="ort.execution_providers",
            )

    def build(self, request: BuildRequest) -> BuildResult:
        """Build a request made by this backend (validated once, when made): one session, its optimized model saved.

        A calibrated config is built as its Q/DQ model; the result stays under the pinned config.
        """
        if request.backend != self.name:
            raise ValueError(f"a build request for backend {request.backend!r} was given to {self.name!r}")
        config, calibrated = request.config, None
        if config.calibration is not None:
            from pytest_trt.calibration.explicit import calibrate_request

            calibrated = calibrate_request(request)
            config = calibrated.typed
        ort = _ort()
        opts = _options(config)
        wall0, t0 = time.time(), time.perf_counter()
        parse_s = time.perf_counter() - t0  # the ONNX file is read by the session: no separate parse stage
        capture = FdCapture(2)
        with tempfile.TemporaryDirectory(prefix="pytest-trt-ort-") as tmp:
            saved = Path(tmp) / "optimized.onnx"
            so = _session_options(opts, opts.graph_optimization_level, verbose=True)
            so.optimized_model_filepath = str(saved)
            error: Exception | None = None
            t1 = time.perf_counter()
            try:
                with capture:
                    session = ort.InferenceSession(str(config.onnx), so, providers=list(opts.execution_providers))
            except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types for bad models
                error = exc
            build_s = time.perf_counter() - t1
            log, unparsed = _parse_log(capture.text, wall0)
            if error is not None:
                text = str(error)
                stage = "parse" if "INVALID_PROTOBUF" in text or "Protobuf parsing failed" in text else "build"
                raise BuildFailed(
                    f"BuildConfig {config.name!r}: ONNX Runtime could not load {str(config.onnx)!r} ({stage}): {text}",
                    config_name=config.name, stage=stage, log=log, onnx=str(config.onnx),
                ) from None
            engine = saved.read_bytes()
        effective = self._effective(session, config, opts, log)
        return BuildResult.built_for(request, engine=engine, effective=effective, log=log,
                                     durations={"parse": parse_s, "build": build_s},
                                     extra={"log_unparsed_lines": unparsed}, calibrated=calibrated)

    def _effective(
        self, session: Any, config: BuildConfig, opts: OrtOptions, log: tuple[LogEntry, ...]
    ) -> dict[str, Any]:
        """Read the options back from the live session; anything not applied as asked fails the build."""
        so = session.get_session_options()
        levels = {getattr(_ort().GraphOptimizationLevel, v, None): k for k, v in LEVELS.items()}
        applied = {
            "graph_optimization_level": levels.get(so.graph_optimization_level, str(so.graph_optimization_level)),
            "execution_providers": list(session.get_providers()),
            "intra_op_threads": so.intra_op_num_threads,
            "inter_op_threads": so.inter_op_num_threads,
            "deterministic": bool(so.use_deterministic_compute),
        }
        asked = opts.to_json()
        wrong = [f"{k}: asked {asked[k]!r}, applied {applied[k]!r}" for k in asked if asked[k] != applied.get(k)]
        if wrong:
            # most often a provider that could not start and fell back to CPU
            raise BuildFailed(
                f"BuildConfig {config.name!r}: ONNX Runtime did not apply the pinned options ({'; '.join(wrong)})",
                config_name=config.name, stage="build", log=log,
            )
        _check_profiles(config, OrtRunner(session), log)
        return {"precision": config.precision, "profiles": [p.to_json() for p in config.profiles], "ort": applied,
                "execution_mode": "sequential"}

    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        import onnx

        from pytest_trt.buildlog.ort_record import record_from_models
        from pytest_trt.calibration.building import attach
        from pytest_trt.calibration.explicit import built_onnx

        if config.onnx_sha256 != result.onnx_sha256:  # memoised by file identity
            # origins are names in the original graph: another model would give a wrong record
            raise ValueError(
                f"BuildConfig {config.name!r}: {str(config.onnx)!r} is not the ONNX this engine was built from "
                f"(sha256 differs from the build's onnx_sha256); rebuild the engine"
            )
        built = built_onnx(result, config)  # the Q/DQ model for a calibrated build: origins name its nodes
        original = onnx.load_from_string(built.read_bytes())
        optimized = onnx.load_from_string(result.engine)
        return attach(record_from_models(
            original, optimized, result.log, backend_version=result.versions.get("onnxruntime"),
            unparsed_lines=int(result.extra.get("log_unparsed_lines", 0)),
        ), result)

    def runner(self, result: BuildResult, config: BuildConfig) -> OrtRunner:
        providers = result.effective_config.get("ort", {}).get("execution_providers")
        return OrtRunner(load_session(result.engine, _options(config), providers=providers))


def _explicit_precision(config: BuildConfig) -> str:
    """The precision a calibrated config runs in on ONNX Runtime (its Q/DQ model's types), once its algorithm is
    one ONNX Runtime's quantizer has."""
    from pytest_trt.common.calibration import EXPLICIT_METHODS

    calib = config.calibration
    assert calib is not None
    if calib.algorithm not in EXPLICIT_METHODS:
        raise UnsupportedOption(
            f"BuildConfig {config.name!r}: calibration.algorithm={calib.algorithm!r} names a TensorRT calibrator; "
            f"ONNX Runtime quantizes with explicit Q/DQ nodes: choose one of {', '.join(EXPLICIT_METHODS)}",
            backend=NAME, option="calibration.algorithm",
        )
    return "typed"


def _parse_log(text: str, wall0: float) -> tuple[tuple[LogEntry, ...], int]:
    from pytest_trt.buildlog.ort_record import parse_ort_log

    return parse_ort_log(text, wall0)


def _check_profiles(config: BuildConfig, runner: OrtRunner, log: tuple[LogEntry, ...]) -> None:
    """Profiles must name model inputs with the model's rank and agree with its fixed dims."""
    specs = {s.name: s for s in runner.inputs}
    for profile in config.profiles:
        for r in profile.inputs:
            spec = specs.get(r.name)
            problem = None
            if spec is None:
                problem = f"names input {r.name!r}, which the model does not have (inputs: {', '.join(specs)})"
            elif len(spec.shape) != len(r.min):
                problem = f"gives input {r.name!r} rank {len(r.min)}, the model has rank {len(spec.shape)} {spec.shape}"
            else:
                for axis, (d, lo, hi) in enumerate(zip(spec.shape, r.min, r.max, strict=True)):
                    if d != -1 and not lo <= d <= hi:
                        problem = f"allows {lo}..{hi} at axis {axis} of input {r.name!r}, whose size is fixed at {d}"
                        break
            if problem:
                raise BuildFailed(f"BuildConfig {config.name!r}: a profile {problem}; fix the profile",
                                  config_name=config.name, stage="build", log=log)

