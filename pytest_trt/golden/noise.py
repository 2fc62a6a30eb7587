"""Measured noise: how far an engine's outputs move from its unoptimized reference, run to run and rebuild to rebuild.

The reference is the model the engine was built from, run by ONNX Runtime with every graph optimization
disabled (:data:`pytest_trt.backends.reference.REFERENCE_OPTIONS`); for a calibrated config that is the
Q/DQ model (:func:`pytest_trt.calibration.explicit.built_onnx`), so the noise is kernel and fusion noise and
the quantization error stays where ``pytest-trt calib errors`` reports it.  Each comparison streams batch by
batch into the same accumulators a golden check uses; nothing is held whole.

Per output the noise is the worst figure over the comparisons (largest max abs/rel and L2 delta, smallest
cosine and top-1 agreement).  The suggested thresholds are ``noise x margin`` with floors
(:data:`FLOOR` for L2 delta and max abs; agreement in whole samples, at least one).  An approved update
measures the engine against its reference once and writes the result into the snapshot (attribute
``noise``); ``check(tolerance="measured")`` takes the suggested thresholds from there, and a failing check
shows the measured noise beside each threshold.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_trt.compare import metrics
from pytest_trt.compare.rules import rule
from pytest_trt.compare.verdict import num

#: the margin a suggestion multiplies the noise by, unless given
DEFAULT_MARGIN = 3.0
#: the smallest suggested L2 delta and max abs (a bit-exact engine still gets a usable threshold)
FLOOR = 1e-6
#: the snapshot attribute holding the noise measured at approval (JSON)
ATTR = "noise"
#: the thresholds a measurement suggests, in the order shown
SUGGESTED = ("l2_delta", "max_abs", "max_rel", "cosine", "top1_agreement")


@dataclass
class _Pair:
    """One output of one comparison (obtained vs its reference), streamed."""

    elements: metrics.ElementAccumulator = field(default_factory=metrics.ElementAccumulator)
    changed: int = 0
    samples: int = 0

    def update(self, obtained: np.ndarray, reference: np.ndarray, classifier: bool) -> None:
        self.elements.update(obtained, reference)
        self.samples += int(obtained.shape[0])
        if classifier:
            self.changed += int(np.count_nonzero(metrics.top1(obtained) != metrics.top1(reference)))


@dataclass(frozen=True)
class OutputNoise:
    """The worst figures of one output over the comparisons; ``changed`` samples changed their top-1."""

    output: str
    samples: int
    max_abs: float
    max_rel: float
    l2_delta: float
    cosine: float
    classifier: bool
    changed: int = 0

    @property
    def top1_agreement(self) -> float | None:
        if not self.classifier:
            return None
        return 1.0 - self.changed / self.samples if self.samples else 1.0

    def figure(self, metric: str) -> float | None:
        """The noise figure that threshold ``metric`` bounds (None: not measured for this output)."""
        if metric == "top1_agreement":
            return self.top1_agreement
        value = getattr(self, metric, None)
        return None if value is None or not math.isfinite(value) else float(value)

    def suggested(self, margin: float) -> dict[str, float]:
        """``noise x margin`` per threshold, with floors; a figure that is not finite suggests nothing."""
        out: dict[str, float] = {
            "l2_delta": max(self.l2_delta * margin, FLOOR),
            "max_abs": max(self.max_abs * margin, FLOOR),
        }
        if math.isfinite(self.max_rel) and self.max_rel > 0:  # a relative error is only bounded where one was seen
            out["max_rel"] = max(self.max_rel * margin, FLOOR)
        out["cosine"] = max(0.0, 1.0 - max(1.0 - self.cosine, 0.0) * margin - FLOOR)
        if self.classifier and self.samples:
            allowed = max(1, math.ceil(self.changed * margin))
            out["top1_agreement"] = max(0.0, 1.0 - allowed / self.samples)
        return {k: v for k, v in out.items() if math.isfinite(v)}

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "max_abs": self.max_abs, "max_rel": self.max_rel, "l2_delta": self.l2_delta,
                "cosine": self.cosine, "classifier": self.classifier, "changed": self.changed,
                "top1_agreement": self.top1_agreement}

    @classmethod
    def from_dict(cls, output: str, d: Mapping[str, Any]) -> OutputNoise:
        return cls(output, int(d["samples"]), float(d["max_abs"]), float(d["max_rel"]), float(d["l2_delta"]),
                   float(d["cosine"]), bool(d["classifier"]), int(d.get("changed", 0)))


@dataclass(frozen=True)
class Noise:
    """What a measurement found: per output, the comparisons it took, the margin of its suggestions."""

    outputs: Mapping[str, OutputNoise]
    comparisons: tuple[str, ...]
    reference: str
    margin: float = DEFAULT_MARGIN
    seconds: float = 0.0
    per_comparison: Mapping[str, Mapping[str, OutputNoise]] = field(default_factory=dict)

    def suggested(self) -> dict[str, dict[str, float]]:
        return {name: o.suggested(self.margin) for name, o in self.outputs.items()}

    def figures(self) -> dict[str, dict[str, float]]:
        """``{output: {threshold name: measured noise}}``, the figures a failure shows beside the thresholds."""
        return {name: {m: v for m in SUGGESTED if (v := o.figure(m)) is not None} for name, o in self.outputs.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": True, "reference": self.reference, "comparisons": list(self.comparisons),
            "margin": self.margin, "seconds": round(self.seconds, 3),
            "outputs": {n: o.to_dict() for n, o in self.outputs.items()},
            "suggested": self.suggested(),
            "per_comparison": {c: {n: o.to_dict() for n, o in rows.items()} for c, rows in self.per_comparison.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Noise:
        return cls({n: OutputNoise.from_dict(n, o) for n, o in d["outputs"].items()}, tuple(d["comparisons"]),
                   str(d["reference"]), float(d["margin"]), float(d.get("seconds", 0.0)))

    def lines(self) -> list[str]:
        """Per output: the spread, then the suggested thresholds with the margin."""
        out = [f"measured noise: {', '.join(self.comparisons)} (reference: {self.reference})"]
        for name, o in self.outputs.items():
            agree = "" if o.top1_agreement is None else f", top-1 agreement {o.top1_agreement:.2%}"
            out.append(f"  {name}: max abs {num(o.max_abs)}, max rel {num(o.max_rel)}, "
                       f"L2 delta {num(o.l2_delta)}, cosine {o.cosine:.6f}{agree} ({o.samples} samples)")
            sug = o.suggested(self.margin)
            out.append(f"  {name}: suggested (noise x {self.margin:g}): "
                       + ", ".join(f"{k}={rule(k).show(v)}" for k, v in sug.items()))
        return out


def not_measured(why: str) -> dict[str, Any]:
    """The ``noise`` record of a snapshot whose noise could not be measured."""
    return {"measured": False, "reason": why}


def stored(record: Mapping[str, Any] | None) -> Noise | None:
    """The :class:`Noise` of a snapshot's ``noise`` record (None: not measured or not recorded)."""
    if not record or not record.get("measured"):
        return None
    return Noise.from_dict(record)


def describe(record: Mapping[str, Any] | None) -> str:
    """One line for ``golden show`` and the approval summary."""
    if record is None:
        return "noise: not recorded (approved before noise was measured)"
    if not record.get("measured"):
        return f"noise: not measured ({record.get('reason', 'no reason given')})"
    n = Noise.from_dict(record)
    parts = [f"{name} L2 {num(o.l2_delta)} max abs {num(o.max_abs)}" for name, o in n.outputs.items()]
    return f"noise: {'; '.join(parts)} (engine vs {n.reference}, margin {n.margin:g})"


Run = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]


class Comparison:
    """Streams the batches of several runs against one another: ``compare(label, obtained, reference)``."""

    def __init__(self, classifier: Callable[[str, np.ndarray], bool]) -> None:
        self._classifier = classifier
        self._decided: dict[str, bool] = {}
        self.pairs: dict[str, dict[str, _Pair]] = {}

    def compare(self, label: str, obtained: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]) -> None:
        rows = self.pairs.setdefault(label, {})
        for name, value in obtained.items():
            if name not in reference:
                continue
            o, r = np.asarray(value), np.asarray(reference[name])
            if o.shape != r.shape:
                continue
            if name not in self._decided:
                self._decided[name] = self._classifier(name, o)
            rows.setdefault(name, _Pair()).update(o, r, self._decided[name])

    def result(self, reference: str, margin: float, seconds: float) -> Noise:
        per: dict[str, dict[str, OutputNoise]] = {}
        for label, rows in self.pairs.items():
            per[label] = {}
            for name, p in rows.items():
                e = p.elements.result()
                per[label][name] = OutputNoise(name, p.samples, e.max_abs, e.max_rel, e.l2_delta, e.cosine,
                                               self._decided[name], p.changed)
        worst: dict[str, OutputNoise] = {}
        for rows2 in per.values():
            for name, o in rows2.items():
                w = worst.get(name)
                worst[name] = o if w is None else OutputNoise(
                    name, max(w.samples, o.samples), max(w.max_abs, o.max_abs), max(w.max_rel, o.max_rel),
                    max(w.l2_delta, o.l2_delta), min(w.cosine, o.cosine), w.classifier, max(w.changed, o.changed))
        return Noise(worst, tuple(per), reference, margin, seconds, per)


def classifier_rule(baselines: Mapping[str, Any], declared: Callable[[str], bool | None],
                    max_label: int | None) -> Callable[[str, np.ndarray], bool]:
    """The golden check's decision of which outputs are class scores: declared, recorded, detected."""
    def decide(name: str, first: np.ndarray) -> bool:
        d = declared(name)
        if d is None and "classifier" in baselines.get(name, {}):
            d = bool(baselines[name]["classifier"])
        if d is None:
            return metrics.looks_like_class_scores(first, max_label, name)
        return bool(d) and metrics.is_classifier(first.shape[1:], first.dtype)
    return decide


def reference_of(engine: Any) -> tuple[Run, str]:
    """The unoptimized reference of ``engine``: its built ONNX (Q/DQ for a calibrated build) on ONNX Runtime
    with optimizations disabled, and a description.  Raises ValueError saying why there is none."""
    import importlib.util

    config, result = getattr(engine, "config", None), getattr(engine, "result", None)
    onnx_path = getattr(config, "onnx", None)
    if config is None or result is None or onnx_path is None:
        raise ValueError("the engine names no ONNX model to run as its reference")
    if importlib.util.find_spec("onnxruntime") is None:
        raise ValueError("onnxruntime is not installed (pip install 'pytest-trt[ort]')")
    from pytest_trt.backends.onnxruntime import OrtRunner, load_session
    from pytest_trt.backends.reference import REFERENCE_OPTIONS
    from pytest_trt.calibration.explicit import built_onnx

    calibration = getattr(config, "calibration", None)
    implicit = calibration is not None and not calibration.explicit
    model = config.onnx if implicit else built_onnx(result, config)
    try:
        runner = OrtRunner(load_session(model, REFERENCE_OPTIONS))
    except Exception as exc:  # noqa: BLE001 - ORT raises several unrelated types for bad models
        raise ValueError(f"ONNX Runtime could not load {model}: {exc}") from None
    kind = "Q/DQ model" if model != config.onnx else "ONNX model"
    note = " (implicit INT8: the noise includes the quantization error)" if implicit else ""
    return runner.run, f"the {kind} on ONNX Runtime, optimizations disabled{note}"


class Tapped:
    """An engine whose ``run`` also runs its reference on the same batch and compares them (the approval's pass).

    Everything else is the engine's.  A reference that fails stops the comparison, not the update:
    :attr:`failure` says why.
    """

    def __init__(self, engine: Any, reference: Run, comparison: Comparison) -> None:
        self._engine, self._reference, self._comparison = engine, reference, comparison
        self.failure: str | None = None
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def run(self, feeds: dict[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        out: Mapping[str, np.ndarray] = self._engine.run(feeds)
        if self.failure is None:
            t0 = time.perf_counter()
            try:
                ref = self._reference(feeds)
                self._comparison.compare("engine vs reference", out, ref)
            except Exception as exc:  # noqa: BLE001 - the reference's failure is reported, the update goes on
                self.failure = f"the reference failed: {type(exc).__name__}: {exc}"
            self.seconds += time.perf_counter() - t0
        return out


def tap(engine: Any, decide: Callable[[str, np.ndarray], bool]) -> tuple[Any, Callable[[], dict[str, Any]]]:
    """``(engine to feed, finish)``: ``finish()`` gives the snapshot's ``noise`` record after the feed."""
    if engine is None:
        return None, lambda: not_measured("outputs were given, not an engine")
    try:
        reference, what = reference_of(engine)
    except (ValueError, OSError) as exc:
        why = str(exc)
        return engine, lambda: not_measured(why)
    except Exception as exc:  # noqa: BLE001 - a reference that cannot be made is reported, the update goes on
        why = f"{type(exc).__name__}: {exc}"
        return engine, lambda: not_measured(why)
    comparison = Comparison(decide)
    tapped = Tapped(engine, reference, comparison)

    def finish() -> dict[str, Any]:
        if tapped.failure is not None:
            return not_measured(tapped.failure)
        if not comparison.pairs:
            return not_measured("the engine and its reference share no output")
        return comparison.result(what, DEFAULT_MARGIN, tapped.seconds).to_dict()
    return tapped, finish


def measure(engines: list[Run], reference: Run, inputs: Mapping[str, Any], samples: int, batch: int, *,
            runs: int, decide: Callable[[str, np.ndarray], bool], what: str, margin: float) -> Noise:
    """``engines[0]`` against ``reference``; its ``runs - 1`` repeats against its first run; each further engine
    (a rebuild) against ``engines[0]``; batch by batch over the golden dataset."""
    t0 = time.perf_counter()
    comparison = Comparison(decide)
    for start in range(0, samples, batch):
        feeds = {n: np.asarray(a[start : start + batch]) for n, a in inputs.items()}
        first = {k: np.array(v, copy=True) for k, v in engines[0](feeds).items()}  # a runner may reuse buffers
        comparison.compare("engine vs reference", first, reference(feeds))
        for _ in range(runs - 1):
            comparison.compare("run to run", engines[0](feeds), first)
        for other in engines[1:]:
            comparison.compare("rebuild to rebuild", other(feeds), first)
    return comparison.result(what, margin, time.perf_counter() - t0)


def measure_config(config: Any, backend_name: str, golden: Any, *, runs: int = 1, rebuilds: int = 0,
                   margin: float = DEFAULT_MARGIN, batch: int | None = None) -> Noise:
    """Build ``config`` on ``backend_name`` (``1 + rebuilds`` times) and measure its noise on the dataset of the
    golden file ``golden``: against its reference, ``runs`` runs, the rebuilds.  Raises the backend's errors
    (:class:`~pytest_trt.errors.TrtError`) and ValueError when no reference can be made."""
    from types import SimpleNamespace

    from pytest_trt.backends.registry import create_backend
    from pytest_trt.backends.request import as_request
    from pytest_trt.golden import feeds
    from pytest_trt.golden.store import GoldenFile, guard

    backend = create_backend(backend_name)
    builds = [backend.build(as_request(backend, config)) for _ in range(1 + rebuilds)]
    runners = [backend.runner(result, config) for result in builds]
    reference, what = reference_of(SimpleNamespace(config=config, result=builds[0]))
    with GoldenFile(golden) as g, guard(golden):
        baselines = g[config.name].baselines if config.name in g else {}
        labels = g.labels()
        max_label = None if labels is None or not labels.size else int(labels.max())
        decide = classifier_rule(baselines, lambda _name: None, max_label)
        size = feeds.batch_size(SimpleNamespace(config=config), batch)
        return measure([r.run for r in runners], reference, g.inputs(), g.samples, size, runs=runs, decide=decide,
                       what=what, margin=margin)
