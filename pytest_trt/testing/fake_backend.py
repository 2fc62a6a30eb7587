"""The fake backend: a test double for tests of pytest-trt's plumbing, never a substitute for a real build.

It goes through everything a real backend does (registry row, build request, cache entry, record,
runner, audit bundle) in a few milliseconds and without TensorRT or ONNX Runtime:

* "building" reads the ONNX file; the engine bytes *are* the ONNX bytes, so a build is deterministic
  and byte-identical, and a cached engine runs exactly what was "built";
* the build log is a real log of what the fake did, one VERBOSE line per ONNX node, and says on its
  first line that no TensorRT was involved;
* the record lists one layer per ONNX node (no fusions: the fake fuses nothing);
* running evaluates the model with ONNX's pure-numpy reference evaluator (``onnx.reference``), or a
  fixed numpy function given as ``compute``.

Its :class:`~pytest_trt.artifact.BuildResult` says ``backend="fake"``; goldens and bundles made with
it name the fake backend and so can never pass for a TensorRT engine's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pytest_trt.backends import registry
from pytest_trt.backends.base import RunnerTensors
from pytest_trt.backends.registry import BackendBase, BackendSpec

if TYPE_CHECKING:
    import numpy as np

    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.base import TensorSpec
    from pytest_trt.backends.request import BuildRequest
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.engine import Engine

#: ``--trt-backend fake``
FAKE = "fake"
#: what the first log line and the device say
DISCLAIMER = "pytest-trt fake backend, a test double: no TensorRT, no engine compiled"

#: a numpy function standing in for the engine: named inputs -> named outputs
Compute = Callable[[Mapping[str, "np.ndarray"]], Mapping[str, "np.ndarray"]]

#: the registry row; ``auto`` never picks it (``in_auto=False``): it is chosen only by name
FAKE_SPEC = BackendSpec(
    name=FAKE, module="pytest_trt.testing.fake_backend", distributions=("pytest-trt", "pytest_trt"),
    extra="test", slug="fake", auto_rank=1000, factory="pytest_trt.testing.fake_backend:create",
    title="a test double for plugin-level tests (no TensorRT; runs the ONNX reference evaluator)",
    key_packages=("onnx", "numpy"), runs_on_cpu=False, in_auto=False,
)


def create(spec: BackendSpec) -> FakeBackend:
    """The registry's factory for :data:`FAKE_SPEC`."""
    return FakeBackend()


@contextlib.contextmanager
def fake_backend(*, compute: Compute | None = None) -> Iterator[FakeBackend]:
    """Register the ``fake`` backend for the block and give a :class:`FakeBackend` (``compute`` as there).

    Pass the instance to an :class:`~pytest_trt.engines.provider.EngineProvider` (``backend=``); a provider that
    creates its own backend by name gets a plain one.  A row that was already registered stays.
    """
    registered = registry.find(FAKE) is not None
    registry.register(FAKE_SPEC)
    try:
        yield FakeBackend(compute=compute)
    finally:
        if not registered:
            registry.unregister(FAKE)


class FakeBackend(BackendBase):
    """A :class:`~pytest_trt.backends.base.Backend` test double (see the module docstring).

    It works unregistered too (``FakeBackend().engine(config)`` in a conftest); registering
    :data:`FAKE_SPEC` is what makes ``--trt-backend fake`` and the bundle slug ``fake`` exist.
    """

    name = FAKE

    def __init__(self, *, compute: Compute | None = None) -> None:
        self.compute = compute

    def _row(self) -> BackendSpec:
        """:data:`FAKE_SPEC`, registered or not."""
        return FAKE_SPEC

    def _library_version(self) -> str:
        """pytest-trt's version: the fake backend is part of it."""
        from pytest_trt.common.package import __version__

        return registry.distribution_version(FAKE_SPEC.distributions[0]) or __version__

    def device(self, config: BuildConfig) -> dict[str, Any]:
        return {"kind": "cpu", "name": "fake (a test double; no device)"}

    def validate(self, config: BuildConfig) -> None:
        from pytest_trt.errors import UnsupportedOption

        if config.calibration is not None:
            raise UnsupportedOption(
                f"BuildConfig {config.name!r}: the fake backend does not calibrate; drop calibration= from "
                f"this config, or test calibration with a real backend (--trt-backend tensorrt-rtx or onnxruntime)",
                backend=FAKE, option="calibration",
            )

    def build(self, request: BuildRequest | BuildConfig) -> BuildResult:
        """"Build": read the ONNX file, log each node, keep the bytes as the engine."""
        import onnx

        from pytest_trt.artifact import BuildResult, LogEntry
        from pytest_trt.backends.request import as_request
        from pytest_trt.errors import BuildFailed

        request = as_request(self, request)
        config = request.config
        t0 = time.perf_counter()
        log = [LogEntry("INFO", 0.0, f"{DISCLAIMER}; reading {config.onnx}")]
        engine = config.onnx.read_bytes()
        try:
            model = onnx.load_from_string(engine)
        except Exception as exc:  # noqa: BLE001 - protobuf raises several types for a bad file
            log.append(LogEntry("ERROR", time.perf_counter() - t0, f"cannot parse {config.onnx}: {exc}"))
            raise BuildFailed(
                f"BuildConfig {config.name!r}: the fake backend could not parse {str(config.onnx)!r} ({exc}); "
                f"give a valid ONNX file",
                config_name=config.name, stage="parse", log=tuple(log), onnx=str(config.onnx),
            ) from None
        for i, node in enumerate(model.graph.node):
            log.append(LogEntry("VERBOSE", time.perf_counter() - t0,
                                f"fake layer {i}: {_node_name(node, i)} ({node.op_type}) kept as is"))
        build_s = time.perf_counter() - t0
        log.append(LogEntry("INFO", build_s, f"fake engine: {len(engine)} bytes (the ONNX model itself)"))
        return BuildResult.built_for(
            request, engine=engine, log=tuple(log), durations={"parse": 0.0, "build": build_s},
            effective={"precision": config.precision, "profiles": [p.to_json() for p in config.profiles]},
        )

    def record(self, result: BuildResult, config: BuildConfig) -> BuildRecord:
        """One layer per ONNX node, in graph order; no fusion."""
        import onnx

        from pytest_trt.buildlog.record import BuildRecord, Layer

        graph = onnx.load_from_string(result.engine).graph
        layers = tuple(Layer(_node_name(n, i), n.op_type, origins=(_node_name(n, i),), precision="Float")
                       for i, n in enumerate(graph.node))
        bindings = tuple(v.name for v in (*graph.input, *graph.output))
        return BuildRecord(source=FAKE, layers=layers, timings={"build_s": result.durations.get("build", 0.0)},
                           backend=FAKE, backend_version=result.backend_version, bindings=bindings,
                           total_lines=sum(len(e.lines()) for e in result.log))

    def runner(self, result: BuildResult, config: BuildConfig) -> FakeRunner:
        return FakeRunner(result.engine, compute=self.compute)

    def engine(self, config: BuildConfig) -> Engine:
        """A fake engine for ``config`` without provider or cache: for a conftest's own ``trt_engine``."""
        from pytest_trt.engines.engine import Engine

        return Engine(config, self.build(config), self)


class FakeRunner(RunnerTensors):
    """Runs the fake engine (ONNX bytes) with ``onnx.reference``, or ``compute`` when given."""

    def __init__(self, model: bytes, *, compute: Compute | None = None) -> None:
        import onnx

        self._model = onnx.load_from_string(model)
        self._compute = compute
        self._evaluator: Any = None
        self._inputs = tuple(_tensor_spec(v) for v in self._model.graph.input)
        self._outputs = tuple(_tensor_spec(v) for v in self._model.graph.output)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        if self._compute is not None:
            return {k: np.asarray(v) for k, v in self._compute(feeds).items()}
        if self._evaluator is None:
            from onnx.reference import ReferenceEvaluator

            self._evaluator = ReferenceEvaluator(self._model)
        names = [o.name for o in self._outputs]
        values = self._evaluator.run(names, dict(feeds))
        return {name: np.asarray(value) for name, value in zip(names, values, strict=True)}


def _node_name(node: Any, index: int) -> str:
    return str(node.name) or f"{node.op_type}_{index}"


def _tensor_spec(value: Any) -> TensorSpec:
    from onnx import helper

    from pytest_trt.backends.base import TensorSpec

    tensor = value.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim)
    return TensorSpec(value.name, str(helper.tensor_dtype_to_np_dtype(tensor.elem_type)), dims)
