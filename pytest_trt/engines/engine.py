"""Engine: a built engine with its config, build evidence, record and runner."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.engines.current import in_test
from pytest_trt.engines.skipping import not_runnable_message, skip_here
from pytest_trt.errors import EngineNotRunnable

if TYPE_CHECKING:
    import numpy as np

    from pytest_trt.artifact import BuildResult
    from pytest_trt.backends.base import Backend, Runner
    from pytest_trt.buildlog.record import BuildRecord
    from pytest_trt.config import BuildConfig
    from pytest_trt.engines.assertions import EngineAssertions
    from pytest_trt.engines.benchmark import BenchmarkResult, Clock


def _assertion_methods() -> dict[str, Any]:
    """The methods of :class:`~pytest_trt.engines.assertions.EngineAssertions`, set on ``Engine``'s base.

    Defining the assertions imports the build-record parser's assertion modules (~3 ms), which a test
    served from the cache that asserts nothing on the record never needs: they load on the first
    lookup of an ``assert_*`` name that ``Engine`` lacks.  Their names are those of the assertion
    registry, so none is listed here.
    """
    from pytest_trt.engines.assertions import EngineAssertions

    methods = {name: method for name, method in vars(EngineAssertions).items() if name.startswith("assert_")}
    for name, method in methods.items():
        setattr(_AssertionMethods, name, method)  # from now on plain methods of the class
    return methods


class _LoadsAssertions(type):
    """The metaclass of ``Engine``'s base, for the class-level lookups (``Engine.assert_fused``, ``help(Engine)``)."""

    def __getattr__(cls, name: str) -> Any:
        methods = _assertion_methods() if name.startswith("assert_") else {}
        if name in methods:
            return methods[name]
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")

    def __dir__(cls) -> list[str]:
        _assertion_methods()
        return list(type.__dir__(cls))


class _AssertionMethods(metaclass=_LoadsAssertions):
    """Where ``Engine`` finds its assertion methods once loaded, for the lookups on an engine."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("assert_"):
            _assertion_methods()
        # looked up again: a method just loaded, else the plain lookup's AttributeError (a failing property
        # runs again to raise its own)
        return object.__getattribute__(self, name)

    def __dir__(self) -> list[str]:
        _assertion_methods()
        return list(object.__dir__(self))


if TYPE_CHECKING:
    _Assertions = EngineAssertions
else:
    _Assertions = _AssertionMethods


class Engine(_Assertions):
    """One engine as a test sees it.

    ``result`` holds the engine bytes and the build evidence, ``record`` the
    structured facts parsed from it (parsed once, on first use), and ``run``
    executes it where this machine can.  The ``assert_*`` methods on the record
    come from :class:`~pytest_trt.engines.assertions.EngineAssertions` (one definition
    each, in :mod:`pytest_trt.buildlog.assertions`), taken on first use.
    """

    def __init__(
        self,
        config: BuildConfig,
        result: BuildResult,
        backend: Backend,
        *,
        artifact_dir: Path | None = None,
        cached: bool = False,
    ) -> None:
        self.config = config
        self.result = result
        self.backend = backend
        self.artifact_dir = artifact_dir
        self.cached = cached

    def __repr__(self) -> str:
        state = "cached" if self.cached else "built"
        return f"<Engine {self.label} {self.backend_name} {state}>"

    @property
    def backend_name(self) -> str:
        return self.result.backend

    @functools.cached_property
    def label(self) -> str:
        return f"{self.config.name} v{self.config.version} [{self.result.config_hash[:12]}]"

    @functools.cached_property
    def record(self) -> BuildRecord:
        # a cache hit reads the record stored with its entry (pytest_trt.engines.record_store); a build's
        # record is stored by the provider once its entry is on disk (EngineProvider.flush)
        if self.cached and self.artifact_dir is not None:
            from pytest_trt.engines.record_store import load_record, save_record

            stored = load_record(self.artifact_dir, self.result)
            if stored is not None:
                return stored
            record = self.backend.record(self.result, self.config)
            save_record(self.artifact_dir, self.result, record)  # an entry of an earlier release
            return record
        return self.backend.record(self.result, self.config)

    def record_facts(self) -> dict[str, Any]:
        """``{"layers": n, "fusions": n, "precisions": {...}}`` of this build (test reports, the session summary).

        On a cache hit they are read from the record stored with the entry without making the record
        (:func:`pytest_trt.engines.record_store.load_facts`); otherwise they come from :attr:`record`.
        """
        known = self.__dict__.get("_record_facts")  # read once per engine (every test's report asks)
        if known is not None:
            return dict(known)
        facts = None
        if not self.record_parsed and self.cached and self.artifact_dir is not None:
            from pytest_trt.engines.record_store import load_facts

            facts = load_facts(self.artifact_dir, self.result)
        if facts is None:
            facts = self.record.facts()
        self.__dict__["_record_facts"] = facts
        return dict(facts)

    @property
    def record_parsed(self) -> bool:
        """Whether ``record`` was computed in this session (it is stored with a built entry at flush)."""
        return "record" in self.__dict__

    @functools.cached_property
    def runner(self) -> Runner:
        return self.backend.runner(self.result, self.config)

    def run(self, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the engine on named inputs; batches beyond the profile's max are split.

        Raises :class:`~pytest_trt.errors.InputMismatch` listing what the
        engine expects for wrong names, ranks, dtypes or shapes, and
        :class:`~pytest_trt.errors.EngineNotRunnable` where this machine
        cannot execute the engine.
        """
        __tracebackhide__ = True
        from pytest_trt.backends.feeding import run_checked  # numpy: loaded on first run, not with the plugin

        try:
            runner = self.runner
        except EngineNotRunnable as exc:
            if not in_test():
                raise
            skip = not_runnable_message(exc.message, self.backend_name)
        else:
            return run_checked(runner, self.config, feeds, label=self.label)
        skip_here(skip)  # outside the except block: the report shows the reason, not a chained traceback

    def reference(self) -> Runner:
        """The same model with every optimization disabled (ONNX Runtime), for differential tests."""
        from pytest_trt.backends.reference import reference_runner

        return reference_runner(self.config)

    def assert_matches_reference(
        self,
        inputs: Mapping[str, Any],
        *,
        rtol: float = 1e-4,
        atol: float = 1e-4,
        cosine: float | None = None,
        reference: str | Path | None = None,
    ) -> None:
        """The engine's outputs for ``inputs`` match the reference runner's (ONNX Runtime, optimizations off).

        Per output ``|engine - reference| <= atol + rtol * |reference|``
        element-wise, and a cosine similarity >= ``cosine`` when given.  The
        failure shows the shape, max abs/rel error, the worst element's index
        and the tolerance that would have passed.  ``reference``: another ONNX
        file to take as the reference (default: the config's own).  Meant for
        hypothesis: ``@given(engine_inputs(engine))``.
        """
        __tracebackhide__ = True
        from pytest_trt.compare.differential import compare_outputs, render_failure

        runner = self._reference_for(reference)
        got = self.run(inputs)
        want = runner.run(inputs)
        diffs = compare_outputs(got, want, rtol=rtol, atol=atol, cosine=cosine)
        if not all(d.passed for d in diffs):
            raise AssertionError(render_failure(self.label, diffs, inputs, rtol=rtol, atol=atol, cosine=cosine))

    def _reference_for(self, reference: str | Path | None) -> Runner:
        from pytest_trt.backends.reference import reference_runner

        key = str(reference) if reference is not None else ""
        cache: dict[str, Runner] = self.__dict__.setdefault("_references", {})
        if key not in cache:
            config = self.config if reference is None else self.config.replace(onnx=Path(reference))
            cache[key] = reference_runner(config)
        return cache[key]

    def benchmark(
        self,
        inputs: Mapping[str, Any],
        *,
        warmup: int = 10,
        iterations: int = 50,
        min_time: float = 0.0,
        rounds: int = 1,
        clock: Clock | None = None,
    ) -> BenchmarkResult:
        """Time ``Engine.run(inputs)``: CUDA events on a GPU runner, a monotonic clock otherwise.

        ``warmup`` untimed runs, then at least ``iterations`` timed runs and
        at least ``min_time`` seconds, in ``rounds`` rounds (the drift check
        compares per-round statistics).  Returns latency median/p90/p99 in ms,
        throughput in samples/s (axis 0 of the inputs) and the spread; on
        the CPU clock also the CPU time of each run.  ``clock``: where CPU-side times are read (the real clocks
        by default; a test injects a deterministic one).
        """
        from pytest_trt.engines.benchmark import benchmark

        return benchmark(self.run, self.runner, inputs, warmup=warmup, iterations=iterations, min_time=min_time,
                         rounds=rounds, device=self.result.device, clock=clock)
