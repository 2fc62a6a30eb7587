"""One candidate of the search built and judged: the config with ``exclude_nodes``, its engine, the golden check.

* ONNX Runtime: the candidate is built by the ``onnxruntime`` backend (its Q/DQ model, optimized as pinned) and
  that engine runs the golden dataset;
* TensorRT-RTX (or TensorRT 11): the candidate is built for real by that backend and must succeed; its build
  record must show every excluded node computing in float (no layer implementing it reads INT8). TensorRT-RTX
  engines run only on a supported GPU, so accuracy is measured on ONNX Runtime's run of the *same* Q/DQ model
  (the same stored calibration, its sha256 compared), and the evaluation says so.

The golden check is the check mode's arithmetic (accumulators, rules, verdict) on the snapshot of the config's
name, with the given thresholds; provenance and structure are not part of it (the candidates differ from the
snapshot's engine by construction).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.backends.request import as_request
from pytest_trt.calibration.building import QDQ_SHA256
from pytest_trt.compare.accumulate import baseline_of
from pytest_trt.compare.assess import judge
from pytest_trt.compare.thresholds import ThresholdSet
from pytest_trt.config import BuildConfig
from pytest_trt.errors import BuildFailed, GoldenMissing
from pytest_trt.golden import running
from pytest_trt.golden.store import GoldenFile, guard, max_label
from pytest_trt.sensitivity.search import Evaluation

RUN_BACKEND = "onnxruntime"
BATCH = 256


def with_exclusions(config: BuildConfig, nodes: tuple[str, ...]) -> BuildConfig:
    """``config`` with ``Calibration.exclude_nodes`` set to ``nodes``."""
    assert config.calibration is not None
    return config.replace(calibration=dataclasses.replace(config.calibration, exclude_nodes=nodes))


def check_snapshot(golden: Path, name: str) -> None:
    """The golden file has a dataset and a snapshot named ``name``; else :class:`GoldenMissing` saying how."""
    with GoldenFile(golden) as g, guard(golden):
        if not g.has_dataset:
            raise GoldenMissing(f"golden file {golden} holds no golden dataset; approve one first "
                                "(pytest ... --trt-update-golden --trt-approve REASON)", path=str(golden))
        if name not in g:
            held = ", ".join(sorted(g)) or "none"
            raise GoldenMissing(f"golden file {golden} has no snapshot {name!r} (snapshots: {held}); the search "
                                "judges candidates against the approved snapshot of the config's name: approve it "
                                "first (pytest ... --trt-update-golden --trt-approve REASON)", path=str(golden))


def batch_of(config: BuildConfig) -> int:
    """The largest batch the config's profiles allow (at most :data:`BATCH`)."""
    if not config.profiles:
        return BATCH
    return max(1, min([BATCH, *(r.max[0] for r in config.profiles[0].inputs if r.max)]))


def judge_engine(run: Any, golden: Path, name: str, limits: ThresholdSet,
                 batch: int = BATCH) -> tuple[bool, tuple[dict[str, Any], ...], str]:
    """Stream the golden dataset through ``run`` and judge it against snapshot ``name``: (passed, checks, summary)."""
    with GoldenFile(golden) as g, guard(golden):
        snap = g[name]
        labels, tags = g.label_rows(), g.tag_rows()
        make = running.accumulator_factory(snap.baselines, lambda _n: None, max_label(labels), strict=True,
                                           labels=labels, tags=tags)
        accumulators = {n: make(n, ds) for n, ds in snap.outputs.items()}
        running.run_dataset(run, g.inputs(), g.samples, batch, accumulators, golden_outputs=snap.outputs,
                            label=f"golden {golden.name} [{name}]", new=make)
        metrics = {n: a.result(g.samples, baseline_of(snap.baselines, n)) for n, a in accumulators.items()}
    verdict = judge(metrics, limits)
    evaluated = [c for c in verdict.checks if c.evaluated]
    failing = [c for c in evaluated if not c.passed]
    shown = failing or evaluated
    summary = "; ".join(f"{c.where}: {c.text}" for c in shown[:3]) + (f" (+{len(shown) - 3} more)"
                                                                      if len(shown) > 3 else "")
    problems = list(verdict.refused)
    if problems:
        summary += "; " + "; ".join(problems)
    return verdict.passed, tuple(c.to_dict() for c in evaluated), summary or "no threshold evaluated"


def int8_nodes(record: Any, nodes: tuple[str, ...]) -> list[str]:
    """Which of ``nodes`` a layer of ``record`` computes in INT8 (a compute layer implementing it reads Int8)."""
    hit = []
    for node in nodes:
        for layer in record.layers:
            if layer.kind == "compute" and node in layer.origins and any(t.dtype == "Int8" for t in layer.inputs):
                hit.append(f"{node} (layer {layer.name})")
                break
    return hit


@dataclass
class Evaluator:
    """Builds, checks and judges one candidate (``__call__``); keeps the backends between candidates."""

    config: BuildConfig
    golden: Path
    limits: ThresholdSet
    backend: str = RUN_BACKEND

    def __post_init__(self) -> None:
        from pytest_trt.backends.registry import create_backend

        self._run_backend = create_backend(RUN_BACKEND)
        self._build_backend = self._run_backend if self.backend == RUN_BACKEND else create_backend(self.backend)

    @property
    def accuracy_note(self) -> str:
        if self.backend == RUN_BACKEND:
            return "accuracy: the ONNX Runtime engine of each candidate, run on the golden dataset"
        return (f"accuracy: ONNX Runtime's run of the same Q/DQ model each {self.backend} candidate was built from "
                f"({self.backend} builds ahead of time here and runs engines only on a supported GPU)")

    def __call__(self, nodes: tuple[str, ...]) -> Evaluation:
        t0 = time.perf_counter()
        config = with_exclusions(self.config, nodes)
        notes: list[str] = []
        builds = 0
        if self._build_backend is not self._run_backend:
            # a BuildFailed propagates: the candidate cannot be built
            built = self._build_backend.build(as_request(self._build_backend, config))
            builds += 1
            record = self._build_backend.record(built, config)
            still = int8_nodes(record, nodes)
            if still:
                raise BuildFailed(f"BuildConfig {config.name!r}: {self.backend} built the excluded node(s) "
                                  f"{', '.join(still)} in INT8; exclude_nodes is not honoured",
                                  config_name=config.name, stage="build")
            notes.append(f"{self.backend} build: {len(record.layers)} layers, excluded nodes in float")
        result = self._run_backend.build(as_request(self._run_backend, config))
        builds += 1
        if self._build_backend is not self._run_backend and built.extra.get(QDQ_SHA256) != result.extra.get(
                QDQ_SHA256):
            raise BuildFailed(f"BuildConfig {config.name!r}: the {self.backend} build and the ONNX Runtime run used "
                              "different Q/DQ models", config_name=config.name, stage="build")
        runner = self._run_backend.runner(result, config)

        def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return dict(runner.run(feeds))

        passed, checks, summary = judge_engine(run, self.golden, config.name, self.limits, batch_of(config))
        return Evaluation(nodes, passed, checks, summary, time.perf_counter() - t0, builds=builds, runs=1,
                          notes=tuple(notes))
