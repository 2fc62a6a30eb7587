"""The golden workflow: :class:`GoldenCheck` (what the ``trt_golden`` fixture returns).

``check()`` either compares (default) or, with ``--trt-update-golden`` and
``--trt-approve REASON``, writes an approved snapshot.  A snapshot is never
created or refreshed silently: a missing one fails with the command that
creates it (and names the golden dataset when none was given).  A snapshot
of another provenance (backend version, device, config) is compared anyway
and the differences are reported, unless the provenance policy makes them
fatal.  An engine this machine cannot execute skips the test, at the
test's own line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.errors import EngineNotRunnable, GoldenError, GoldenRegression, GoldenStructureWarning
from pytest_trt.golden import structure
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.results import (
    CheckResult,
    Classifier,
    EngineLike,
    GoldenScope,
    GoldenSettings,
    UpdateResult,
)

__all__ = ["CheckResult", "Classifier", "EngineLike", "GoldenCheck", "GoldenRegression", "GoldenScope",
           "GoldenSettings", "GoldenStructureWarning", "UpdateResult"]

_VERDICTS = {"GoldenMissing": "missing", "GoldenTainted": "tainted", "GoldenCorrupt": "corrupt",
             "GoldenUnapproved": "unapproved"}


class GoldenCheck:
    """Compares an engine (or its outputs) with the approved golden snapshot of its config."""

    def __init__(
        self,
        settings: GoldenSettings,
        *,
        engine_provider: Callable[[], Any] | None = None,
        config_provider: Callable[[], Any] | None = None,
        nodeid: str | None = None,
        command_nodeid: str | None = None,
        on_update: Callable[[UpdateResult], None] | None = None,
        on_verdict: Callable[[dict[str, Any]], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        #: what the modes are given: settings, the test's ids, where notes go
        self.scope = GoldenScope(settings, nodeid, command_nodeid or nodeid, on_note)
        self._on_verdict = on_verdict
        self._engine_provider = engine_provider
        self._config_provider = config_provider
        self._on_update = on_update

    @property
    def settings(self) -> GoldenSettings:
        return self.scope.settings

    @property
    def nodeid(self) -> str | None:
        return self.scope.nodeid

    @property
    def command_nodeid(self) -> str | None:
        """The test id as typed where pytest was invoked (suggested commands); ``nodeid`` stays rootdir-relative."""
        return self.scope.command_nodeid

    def path_for(self, config_name: str) -> Path:
        """``<golden_dir>/<config name>.h5``."""
        return self.scope.path_for(config_name)

    def prefetch(self, config_name: str | None) -> None:
        """Start the file digest of ``config_name``'s golden on another core (:func:`integrity.prefetch`)."""
        prefetch(self.settings, config_name)

    def check(
        self,
        engine_or_outputs: Any = None,
        *,
        structure: str = "fail",
        dataset: GoldenDataset | None = None,
        per_output: Mapping[str, Mapping[str, Any]] | None = None,
        batch_size: int | None = None,
        classifier: Classifier = None,
        tolerance: str | None = None,
        **thresholds: Any,
    ) -> CheckResult | UpdateResult:
        """Compare with the golden, or write an approved snapshot in update mode.

        ``engine_or_outputs``: an engine (default: the test's ``trt_engine``) or
        ``{output: (N, ...) array}``.  ``structure``: ``"fail"``, ``"warn"`` or
        ``"ignore"`` a changed build record.  ``dataset``: the golden dataset,
        written into a new golden file by an approved update and verified
        against the file otherwise.  ``thresholds``: see
        :class:`~pytest_trt.compare.thresholds.Thresholds`; ``per_output``
        overrides them per output name.  ``classifier``: which outputs are
        class scores (``True``, ``["logits"]``, ``{"boxes": False}``);
        undeclared outputs are detected (see
        :func:`~pytest_trt.compare.metrics.looks_like_class_scores`) and the
        golden remembers the decision.  ``tolerance="measured"``: per output,
        the thresholds suggested by the noise measured at approval (the
        engine against its unoptimized reference, see
        :mod:`pytest_trt.golden.noise`); explicit thresholds still win.

        (Over 80 lines because this docstring is the reference of every argument; the body is the one place
        where a check's verdict, skip and update are reported.)
        """
        __tracebackhide__ = True
        self.prefetch(getattr(getattr(engine_or_outputs, "config", None), "name", None))
        # imported on use: they load h5py, which creating the fixture must not (the writers: only to update)
        from pytest_trt.golden import timing, verifying

        if structure not in structure_modes():
            raise GoldenError(f"structure={structure!r}; choose one of {', '.join(structure_modes())}")
        if tolerance not in (None, "measured"):
            raise GoldenError(f"tolerance={tolerance!r}; the one choice is tolerance=\"measured\" (the thresholds "
                              "the noise measured at approval suggests)")
        timing_opts = timing.split_options(thresholds)  # latency_drift=, throughput_drift=
        limits = self.settings.thresholds.with_overrides(thresholds, per_output)
        declared = declared_classifiers(classifier)
        engine, outputs = self._resolve(engine_or_outputs)
        config = engine.config if engine is not None else self._config()
        if timing_opts is not None and engine is None:
            raise GoldenError("check(latency_drift=/throughput_drift=) times an engine: pass the engine, not outputs")

        config_hash = engine.result.config_hash if engine is not None else config.config_hash
        skip_message: str | None = None
        try:
            result: CheckResult | UpdateResult
            ensure_runnable(engine)
            if self.settings.update:
                from pytest_trt.golden import updating

                updated = updating.update(self.scope, config, engine, outputs, dataset=dataset, batch_size=batch_size,
                                          classifier=declared, limits=limits)
                if self._on_update is not None:
                    self._on_update(updated)
                result = updated
            else:
                result = verifying.verify(self.scope, config, engine, outputs, structure=structure, dataset=dataset,
                                          limits=limits, batch_size=batch_size, classifier=declared,
                                          tolerance=tolerance)
            if timing_opts is not None:
                (timing.store if self.settings.update else timing.verify)(self.scope, engine, timing_opts)
        except EngineNotRunnable as exc:
            self._verdict(config_hash, "skipped", exc.message)
            skip_message = not_runnable_skip(exc, getattr(engine, "backend_name", ""))
        except GoldenError as exc:
            detail = exc.context.get("verdict")
            summary = exc.context.get("outputs_summary")
            checked = exc.context.get("golden_generation")
            dataset_sha = exc.context.get("golden_dataset_sha256")
            self._verdict(config_hash, _VERDICTS.get(type(exc).__name__, "fail"), exc.message,
                          **({"detail": detail} if detail else {}), **({"outputs": summary} if summary else {}),
                          **({"golden": checked[0], "generation": checked[1]} if checked else {}),
                          **({"dataset_sha256": dataset_sha} if dataset_sha else {}))
            raise
        if skip_message is not None:
            from pytest_trt.engines.skipping import skip_here

            skip_here(skip_message)
        if isinstance(result, UpdateResult):
            self._verdict(config_hash, "updated", None, golden=str(result.path), generation=result.generation,
                          dataset_sha256=result.dataset_sha256)
            return result
        summary = result.outputs_summary
        self._verdict(config_hash, "pass", result.note, golden=str(result.path), generation=result.generation,
                      dataset_sha256=result.dataset_sha256, detail=result.verdict.to_dict(),
                      **({"outputs": summary} if summary else {}))
        if result.note:
            self.note(result.note)
        return result

    def note(self, text: str) -> None:
        """A provenance note for the terminal summary (a passing check whose evidence differs)."""
        self.scope.note(text)

    def _verdict(self, config_hash: str, verdict: str, message: str | None, **extra: Any) -> None:
        """Tell the audit layer (bundle golden.json, report section) how the check ended."""
        if self._on_verdict is not None:
            self._on_verdict({"config_hash": config_hash, "verdict": verdict, "message": message,
                              "test": self.nodeid, **extra})

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


def prefetch(settings: GoldenSettings, config_name: str | None) -> None:
    """Start hashing ``config_name``'s golden file on another core (the check waits for that digest): never raises,
    never opens the file with h5py."""
    if not isinstance(config_name, str) or not config_name:
        return
    from pytest_trt.golden import integrity

    try:
        integrity.prefetch(GoldenScope(settings, None, None, None).path_for(config_name))
    except Exception:  # noqa: BLE001 - an early hash is an optimisation: the check hashes in line and reports
        return


def structure_modes() -> tuple[str, ...]:
    return structure.STRUCTURE_MODES


def declared_classifiers(classifier: Classifier) -> Callable[[str], bool | None]:
    """``check(classifier=...)`` as a per-output lookup (None: not declared)."""
    if classifier is None or isinstance(classifier, bool):
        return lambda name: classifier
    if isinstance(classifier, Mapping):
        table = {str(k): bool(v) for k, v in classifier.items()}
        return table.get
    if isinstance(classifier, str):
        raise GoldenError(f"classifier={classifier!r}: give a list of output names, e.g. classifier=[{classifier!r}]")
    names = frozenset(str(n) for n in classifier)
    return lambda name: True if name in names else None


def ensure_runnable(engine: Any) -> None:
    """Raise :class:`EngineNotRunnable` before any golden work when this machine cannot execute ``engine``."""
    if engine is not None and getattr(type(engine), "runner", None) is not None:
        engine.runner  # noqa: B018 - Engine.runner raises EngineNotRunnable with the backend's reason


def not_runnable_skip(exc: EngineNotRunnable, backend: str) -> str:
    from pytest_trt.engines.skipping import not_runnable_message

    return not_runnable_message(exc.message, backend)
