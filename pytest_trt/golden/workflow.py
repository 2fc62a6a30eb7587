"""The golden workflow: :class:`GoldenCheck` (what the ``trt_golden`` fixture returns).

``check()`` either compares (default) or, with ``--trt-update-golden`` and
``--trt-approve REASON``, writes an approved snapshot.  A snapshot is never
created or refreshed silently: a missing one fails with the command that
creates it, a tainted one fails with the fields that differ.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pytest_trt.compare import distribution
from pytest_trt.compare.render import render_deltas, render_regression, update_command
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.compare.verdict import Breach, OutputMetrics, evaluate
from pytest_trt.errors import GoldenError, GoldenTainted
from pytest_trt.golden import feeds, structure
from pytest_trt.golden.approvals import Approval
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.streaming import OutputStream, run_dataset


@runtime_checkable
class EngineLike(Protocol):
    """What a golden check needs of an engine (``pytest_trt.engine.Engine`` fits)."""

    @property
    def config(self) -> Any: ...  # BuildConfig: .name, .config_hash, .onnx_sha256, .profiles

    @property
    def result(self) -> Any: ...  # BuildResult: .backend, .versions, .device, .config_hash, .onnx_sha256

    @property
    def record(self) -> Any: ...  # BuildRecord

    @property
    def label(self) -> str: ...

    @property
    def backend_name(self) -> str: ...

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


class GoldenRegression(GoldenError, AssertionError):
    """Outputs or structure moved beyond the allowed thresholds (a test failure, not an error)."""


class GoldenStructureWarning(UserWarning):
    """The engine's structure changed and the test asked for ``structure="warn"``."""


@dataclass(frozen=True)
class GoldenSettings:
    """Session-wide settings, from the command line and ini."""

    golden_dir: Path
    update: bool = False
    approve: str | None = None
    thresholds: ThresholdSet = field(default_factory=ThresholdSet)
    rootdir: Path | None = None  # where git is asked for the commit and the approver
    command_args: tuple[str, ...] = ()  # session options the update command must repeat (--trt-backend ...)


@dataclass(frozen=True)
class CheckResult:
    """A passing check (a failing one raises)."""

    config: str
    path: Path
    generation: int
    metrics: Mapping[str, OutputMetrics]
    structure: str | None  # rendered diff when it changed and the test allowed it


@dataclass(frozen=True)
class UpdateResult:
    """An approved refresh; ``deltas`` compare the new outputs with the previous generation."""

    config: str
    path: Path
    generation: int
    deltas: Mapping[str, OutputMetrics]
    structure: str | None
    approval: Approval

    def summary_lines(self) -> list[str]:
        """Terminal-summary lines: what the refresh changed, per output."""
        label = f"{self.path.name} [{self.config}] generation {self.generation}"
        lines = render_deltas(label, self.deltas)
        if self.structure:
            lines += [f"{label}: structure: {s}" for s in self.structure.splitlines()]
        return lines


_VERDICTS = {"GoldenMissing": "missing", "GoldenTainted": "tainted", "GoldenCorrupt": "corrupt"}


class GoldenCheck:
    """Compares an engine (or its outputs) with the approved golden snapshot of its config."""

    def __init__(
        self,
        settings: GoldenSettings,
        *,
        engine_provider: Callable[[], Any] | None = None,
        config_provider: Callable[[], Any] | None = None,
        nodeid: str | None = None,
        on_update: Callable[[UpdateResult], None] | None = None,
        on_verdict: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings
        self._on_verdict = on_verdict
        self._engine_provider = engine_provider
        self._config_provider = config_provider
        self.nodeid = nodeid
        self._on_update = on_update

    def path_for(self, config_name: str) -> Path:
        """``<golden_dir>/<config name>.h5``."""
        return self.settings.golden_dir / f"{config_name}.h5"

    def check(
        self,
        engine_or_outputs: Any = None,
        *,
        structure: str = "fail",
        dataset: GoldenDataset | None = None,
        per_output: Mapping[str, Mapping[str, Any]] | None = None,
        batch_size: int | None = None,
        **thresholds: Any,
    ) -> CheckResult | UpdateResult:
        """Compare with the golden, or write an approved snapshot in update mode.

        ``engine_or_outputs``: an engine (default: the test's ``trt_engine``) or
        ``{output: (N, ...) array}``.  ``structure``: ``"fail"``, ``"warn"`` or
        ``"ignore"`` a changed build record.  ``dataset``: the golden dataset,
        written into a new golden file by an approved update and verified
        against the file otherwise.  ``thresholds``: see
        :class:`~pytest_trt.compare.thresholds.Thresholds`; ``per_output``
        overrides them per output name.
        """
        __tracebackhide__ = True
        if structure not in structure_modes():
            raise GoldenError(f"structure={structure!r}; choose one of {', '.join(structure_modes())}")
        from pytest_trt.golden import timing, updating, verifying

        timing_opts = timing.split_options(thresholds)  # latency_drift=, throughput_drift=
        limits = self.settings.thresholds.with_overrides(thresholds, per_output)
        engine, outputs = self._resolve(engine_or_outputs)
        config = engine.config if engine is not None else self._config()
        if timing_opts is not None and engine is None:
            raise GoldenError("check(latency_drift=/throughput_drift=) times an engine: pass the engine, not outputs")

        config_hash = engine.result.config_hash if engine is not None else config.config_hash
        try:
            result: CheckResult | UpdateResult
            if self.settings.update:
                updated = updating.update(self, config, engine, outputs, dataset=dataset, batch_size=batch_size)
                if self._on_update is not None:
                    self._on_update(updated)
                result = updated
            else:
                result = verifying.verify(self, config, engine, outputs, structure=structure, dataset=dataset,
                                          limits=limits, batch_size=batch_size)
            if timing_opts is not None:
                (timing.store if self.settings.update else timing.verify)(self, engine, timing_opts)
        except GoldenError as exc:
            self._verdict(config_hash, _VERDICTS.get(type(exc).__name__, "fail"), exc.message)
            raise
        verdict = "updated" if isinstance(result, UpdateResult) else "pass"
        self._verdict(config_hash, verdict, None, golden=str(result.path), generation=result.generation)
        return result

    def _verdict(self, config_hash: str, verdict: str, message: str | None, **extra: Any) -> None:
        """Tell the audit layer (bundle golden.json, report section) how the check ended."""
        if self._on_verdict is not None:
            self._on_verdict({"config_hash": config_hash, "verdict": verdict, "message": message,
                              "test": self.nodeid, **extra})

    # -- helpers shared by verifying and updating --------------------------
    def _resolve(self, given: Any) -> tuple[Any | None, Mapping[str, np.ndarray] | None]:
        if given is None:
            if self._engine_provider is None:
                raise GoldenError("check() needs an engine or outputs; none given and no trt_engine fixture available")
            given = self._engine_provider()
        if isinstance(given, Mapping):
            return None, {str(k): np.asarray(v) for k, v in given.items()}
        if callable(getattr(given, "run", None)) and hasattr(given, "config"):
            return given, None
        raise GoldenError(f"check() takes an engine or a dict of output arrays, got {type(given).__name__}")

    def _config(self) -> Any:
        if self._config_provider is None:
            raise GoldenError("check(outputs) needs the test's config: mark the test with @pytest.mark.trt(config)")
        return self._config_provider()

    def missing_message(self, name: str, path: Path, what: str) -> str:
        return (f"no golden for {name!r}: {what}. Goldens are never created silently; after checking the "
                f"engine, create it with:\n  {update_command(self.nodeid, args=self.settings.command_args)}")


def structure_modes() -> tuple[str, ...]:
    return structure.STRUCTURE_MODES


def raise_failure(
    check: GoldenCheck,
    *,
    golden: str,
    tainted: tuple[str, ...],
    problems: list[str],
    breaches: list[Breach],
    metrics: Mapping[str, OutputMetrics],
    structure_text: str | None,
) -> None:
    """Raise GoldenTainted (provenance differs) or GoldenRegression with the one rendered message."""
    __tracebackhide__ = True
    message = render_regression(golden=golden, breaches=breaches, metrics=list(metrics.values()),
                                structure=structure_text, problems=problems, nodeid=check.nodeid,
                                command_args=check.settings.command_args)
    if tainted:
        raise GoldenTainted(message, fields=tainted)
    raise GoldenRegression(message, breaches=[b.line() for b in breaches])


def warn_structure(text: str, golden: str) -> None:
    warnings.warn(GoldenStructureWarning(f"{golden}: the engine's structure differs from the golden's:\n{text}"),
                  stacklevel=3)


def evaluate_all(metrics: Mapping[str, OutputMetrics], limits: ThresholdSet) -> list[Breach]:
    return [b for name, m in metrics.items() for b in evaluate(m, limits.for_output(name))]


def baseline_of(baselines: Mapping[str, Any], output: str) -> distribution.DistributionBaseline | None:
    d = baselines.get(output, {}).get("distribution")
    return distribution.DistributionBaseline.from_dict(d) if d else None


def pre_streams(
    golden_outputs: Mapping[str, Any], baselines: Mapping[str, Any], *, strict: bool
) -> dict[str, OutputStream]:
    """One stream per golden output, with the golden's logits/probabilities decision."""
    streams = {}
    for name, ds in golden_outputs.items():
        base = baseline_of(baselines, name)
        streams[name] = OutputStream(name, ds, logits=None if base is None else base.logits, strict=strict)
    return streams


def feed(check: GoldenCheck, engine: Any, outputs: Mapping[str, np.ndarray] | None, inputs: Mapping[str, Any],
         samples: int, batch_size: int | None, streams: dict[str, OutputStream], *,
         golden_outputs: Mapping[str, Any] | None, label: str,
         sink: Callable[[int, Mapping[str, np.ndarray]], None] | None = None) -> dict[str, OutputStream]:
    """Stream the engine's (or the given) outputs into ``streams`` and ``sink``."""
    if engine is not None:
        feeds.validate(engine, inputs, label)
        return run_dataset(engine.run, inputs, samples, feeds.batch_size(engine, batch_size), streams,
                           golden_outputs=golden_outputs, label=label, sink=sink)
    assert outputs is not None
    for name, arr in outputs.items():
        if arr.ndim == 0 or arr.shape[0] != samples:
            raise GoldenError(f"{label}: output {name!r} has shape {arr.shape}; the golden dataset has {samples} "
                              "samples, so axis 0 must be that long", output=name)

    def sliced(fs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        idx = fs["sample"]
        return {k: v[int(idx[0]) : int(idx[-1]) + 1] for k, v in outputs.items()}

    index = {"sample": np.arange(samples)}
    return run_dataset(sliced, index, samples, batch_size or 4096, streams, golden_outputs=golden_outputs,
                       label=label, sink=sink)
