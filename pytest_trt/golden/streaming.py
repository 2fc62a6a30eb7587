"""Run the golden dataset through an engine in batches and compare as the batches come.

Neither the obtained nor the golden outputs are ever held whole: each batch is
compared with the matching golden rows (read from disk) and, in update mode,
written to the new snapshot.  Only per-sample classifier figures (a few
numbers per sample) are kept until the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pytest_trt.compare import distribution, metrics
from pytest_trt.compare.verdict import OutputMetrics
from pytest_trt.errors import EngineNotRunnable, GoldenError

DEFAULT_BATCH = 64


class ArrayLike(Protocol):
    """numpy arrays and h5py datasets alike."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    def __getitem__(self, key: Any) -> Any: ...


Run = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]


def iter_batches(
    inputs: Mapping[str, ArrayLike], samples: int, batch: int
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(start, feeds)`` for consecutive batches of at most ``batch`` samples."""
    for start in range(0, samples, batch):
        yield start, {name: np.asarray(arr[start : start + batch]) for name, arr in inputs.items()}


@dataclass
class OutputStream:
    """Accumulates one output: elementwise stats vs golden, per-sample classifier figures."""

    name: str
    golden: ArrayLike | None
    logits: bool | None = None  # from the golden's baseline; decided on the first batch otherwise
    elements: metrics.ElementAccumulator = field(default_factory=metrics.ElementAccumulator)
    classifier: bool = False
    declared: bool | None = None  # classifier= of check(), or the golden's recorded decision; None: detect
    max_label: int | None = None  # the labelled dataset's largest label, evidence for detection
    strict: bool = True  # False in update mode: a changed shape only drops the comparison
    sample_shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    _o_top1: list[np.ndarray] = field(default_factory=list)
    _g_top1: list[np.ndarray] = field(default_factory=list)
    _stats: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def update(self, start: int, obtained: np.ndarray) -> None:
        if self.dtype is None:
            self.sample_shape, self.dtype = tuple(obtained.shape[1:]), obtained.dtype
            self.classifier = self._decide(obtained)
            if self.golden is not None and tuple(self.golden.shape[1:]) != self.sample_shape and not self.strict:
                self.golden = None
            if self.golden is not None and tuple(self.golden.shape[1:]) != self.sample_shape:
                raise GoldenError(
                    f"output {self.name!r}: the engine gives samples of shape {self.sample_shape}, "
                    f"the golden holds {tuple(self.golden.shape[1:])}", output=self.name,
                )
        if self.classifier and np.issubdtype(obtained.dtype, np.floating):
            if self.logits is None:
                self.logits = not distribution.looks_like_probabilities(obtained)
            stats, top = distribution.per_sample_top1(obtained, logits=self.logits)
            for k, v in stats.items():
                self._stats.setdefault(k, []).append(v)
            self._o_top1.append(top)
        elif self.classifier:
            self._o_top1.append(metrics.top1(obtained))
        if self.golden is None:
            return
        gold = np.asarray(self.golden[start : start + obtained.shape[0]])
        self.elements.update(obtained, gold)
        if self.classifier:
            self._g_top1.append(metrics.top1(gold))

    def _decide(self, first: np.ndarray) -> bool:
        if self.declared is None:
            return metrics.looks_like_class_scores(first, self.max_label)
        if self.declared and not metrics.is_classifier(self.sample_shape, first.dtype):
            raise GoldenError(
                f"output {self.name!r} is declared a classifier but gives samples of shape {self.sample_shape} "
                f"({first.dtype}); class scores are float (C,) per sample, or integer class indices (); "
                "drop it from classifier=", output=self.name,
            )
        return self.declared

    def per_sample_stats(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v) for k, v in self._stats.items()}

    def obtained_top1(self) -> np.ndarray | None:
        return np.concatenate(self._o_top1) if self._o_top1 else None

    def result(self, samples: int, labels: np.ndarray | None, tags: Sequence[str] | None,
               base: distribution.DistributionBaseline | None) -> OutputMetrics:
        """Figures of obtained vs golden (requires a golden)."""
        stats = self.elements.result()
        if not self.classifier or not self._o_top1:
            return OutputMetrics(self.name, samples, stats)
        o, g = np.concatenate(self._o_top1), np.concatenate(self._g_top1)
        drift = distribution.drift(base, self.per_sample_stats()) if base is not None and self._stats else ()
        return OutputMetrics(
            self.name, samples, stats,
            top1_agreement=metrics.agreement(o, g),
            accuracy=None if labels is None else metrics.accuracy(o, labels),
            golden_accuracy=None if labels is None else metrics.accuracy(g, labels),
            tags=metrics.per_tag(o, g, labels, tags) if tags is not None else (),
            drift=drift,
        )

    def baseline(self, labels: np.ndarray | None, tags: Sequence[str] | None) -> dict[str, Any]:
        """Metric baselines of these outputs as a new golden: accuracy (overall, per tag), distribution."""
        out: dict[str, Any] = {"classifier": self.classifier}
        o = self.obtained_top1()
        if o is not None and labels is not None:
            out["accuracy"] = metrics.accuracy(o, labels)
            if tags is not None:
                groups = metrics.split_tags(tags)
                out["tag_accuracy"] = {t: metrics.accuracy(o[i], labels[i]) for t, i in groups.items()}
        if self._stats:
            stats = self.per_sample_stats()
            sds = distribution.bootstrap_sds({k: stats[k] for k in distribution.STATS})
            out["distribution"] = distribution.DistributionBaseline(
                bool(self.logits),
                tuple(distribution.StatBaseline(k, float(stats[k].mean()), sds[k]) for k in distribution.STATS),
            ).to_dict()
        return out


def check_output_names(obtained: Sequence[str], golden: Sequence[str], label: str) -> None:
    missing, extra = sorted(set(golden) - set(obtained)), sorted(set(obtained) - set(golden))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing output(s) {', '.join(map(repr, missing))} that the golden holds")
        if extra:
            parts.append(f"new output(s) {', '.join(map(repr, extra))} that the golden lacks")
        raise GoldenError(
            f"{label}: {'; '.join(parts)}. The engine gives {sorted(obtained)}, the golden holds {sorted(golden)}; "
            "if the model's outputs changed on purpose, refresh the golden with approval", outputs=sorted(obtained),
        )


def run_dataset(
    run: Run,
    inputs: Mapping[str, ArrayLike],
    samples: int,
    batch: int,
    streams: dict[str, OutputStream],
    *,
    golden_outputs: Mapping[str, ArrayLike] | None,
    label: str,
    sink: Callable[[int, Mapping[str, np.ndarray]], None] | None = None,
    new_stream: Callable[[str, ArrayLike | None], OutputStream] = OutputStream,
) -> dict[str, OutputStream]:
    """Feed every batch to ``run``; update ``streams`` (made by ``new_stream`` per new output) and ``sink``."""
    for start, feeds in iter_batches(inputs, samples, batch):
        try:
            outputs = run(feeds)
        except EngineNotRunnable:  # not a failure of these samples: the check skips
            raise
        except Exception as exc:  # the backend's own error, with the sample range that caused it
            raise GoldenError(
                f"{label}: running golden samples {start}..{start + len(next(iter(feeds.values()))) - 1} failed: "
                f"{type(exc).__name__}: {exc}", start=start,
            ) from exc
        if start == 0 and golden_outputs is not None:
            check_output_names(list(outputs), list(golden_outputs), label)
        size = next(iter(feeds.values())).shape[0]
        for name, value in outputs.items():
            arr = np.asarray(value)
            if arr.ndim == 0 or arr.shape[0] != size:
                raise GoldenError(f"{label}: output {name!r} has shape {arr.shape} for a batch of {size}; "
                                  "golden outputs need the batch on axis 0", output=name)
            if name not in streams:
                gold = None if golden_outputs is None else golden_outputs.get(name)
                streams[name] = new_stream(name, gold)
            try:
                streams[name].update(start, arr)
            except GoldenError as exc:  # name the golden file, not only the output
                raise GoldenError(f"{label}: {exc.message}", **exc.context) from None
        if sink is not None:
            try:
                sink(start, outputs)
            except GoldenError as exc:
                raise GoldenError(f"{label}: {exc.message}", **exc.context) from None
    return streams

