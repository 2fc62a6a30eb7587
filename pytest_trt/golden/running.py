"""Running the golden dataset through an engine (or given outputs) batch by batch.

Shared by check mode (:mod:`verifying`) and update mode (:mod:`updating`):
batches of inputs are fed to ``run()``, each output batch goes to its
:class:`~pytest_trt.compare.accumulate.OutputAccumulator` (the comparison) and,
in update mode, to a sink that writes the new snapshot.  Nothing is held whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_trt.compare.accumulate import ArrayLike, OutputAccumulator, accumulator_for
from pytest_trt.errors import EngineNotRunnable, GoldenError
from pytest_trt.golden import feeds

Run = Callable[[dict[str, np.ndarray]], Mapping[str, np.ndarray]]
NewAccumulator = Callable[[str, ArrayLike | None], OutputAccumulator]
Sink = Callable[[int, Mapping[str, np.ndarray]], None]


def iter_batches(
    inputs: Mapping[str, ArrayLike], samples: int, batch: int
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(start, feeds)`` for consecutive batches of at most ``batch`` samples."""
    for start in range(0, samples, batch):
        yield start, {name: np.asarray(arr[start : start + batch]) for name, arr in inputs.items()}


def accumulator_factory(baselines: Mapping[str, Any], declared: Callable[[str], bool | None], max_label: int | None,
                        *, strict: bool, labels: ArrayLike | None = None,
                        tags: ArrayLike | None = None) -> NewAccumulator:
    """Accumulators whose classifier decision is: declared, else the golden's recorded one, else detected.

    ``labels`` and ``tags`` (the golden dataset's, as stored) are read batch by batch alongside the outputs.
    """
    def make(name: str, golden: ArrayLike | None) -> OutputAccumulator:
        return accumulator_for(name, golden, baselines, declared(name), max_label, strict=strict,
                               labels=labels, tags=tags)
    return make


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
    accumulators: dict[str, OutputAccumulator],
    *,
    golden_outputs: Mapping[str, ArrayLike] | None,
    label: str,
    new: NewAccumulator,
    sink: Sink | None = None,
) -> dict[str, OutputAccumulator]:
    """Feed every batch to ``run``; update ``accumulators`` (made by ``new`` per new output) and ``sink``."""
    for start, batch_feeds in iter_batches(inputs, samples, batch):
        try:
            outputs = run(batch_feeds)
        except EngineNotRunnable:  # not a failure of these samples: the check skips
            raise
        except Exception as exc:  # the backend's own error, with the sample range that caused it
            raise GoldenError(
                f"{label}: running golden samples {start}..{start + len(next(iter(batch_feeds.values()))) - 1} "
                f"failed: {type(exc).__name__}: {exc}", start=start,
            ) from exc
        if start == 0 and golden_outputs is not None:
            check_output_names(list(outputs), list(golden_outputs), label)
        size = next(iter(batch_feeds.values())).shape[0]
        for name, value in outputs.items():
            arr = np.asarray(value)
            if arr.ndim == 0 or arr.shape[0] != size:
                raise GoldenError(f"{label}: output {name!r} has shape {arr.shape} for a batch of {size}; "
                                  "golden outputs need the batch on axis 0", output=name)
            if name not in accumulators:
                accumulators[name] = new(name, None if golden_outputs is None else golden_outputs.get(name))
            try:
                accumulators[name].update(start, arr)
            except GoldenError as exc:  # name the golden file, not only the output
                raise GoldenError(f"{label}: {exc.message}", **exc.context) from None
        if sink is not None:
            try:
                sink(start, outputs)
            except GoldenError as exc:
                raise GoldenError(f"{label}: {exc.message}", **exc.context) from None
    return accumulators


def feed(engine: Any, outputs: Mapping[str, np.ndarray] | None, inputs: Mapping[str, Any], samples: int,
         batch_size: int | None, accumulators: dict[str, OutputAccumulator], *,
         golden_outputs: Mapping[str, Any] | None, label: str, new: NewAccumulator,
         sink: Sink | None = None) -> dict[str, OutputAccumulator]:
    """Stream the engine's (or the given) outputs into ``accumulators`` and ``sink``."""
    if engine is not None:
        feeds.validate(engine, inputs, label)
        return run_dataset(engine.run, inputs, samples, feeds.batch_size(engine, batch_size), accumulators,
                           golden_outputs=golden_outputs, label=label, sink=sink, new=new)
    assert outputs is not None
    for name, arr in outputs.items():
        if arr.ndim == 0 or arr.shape[0] != samples:
            raise GoldenError(f"{label}: output {name!r} has shape {arr.shape}; the golden dataset has {samples} "
                              "samples, so axis 0 must be that long", output=name)

    def sliced(fs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        idx = fs["sample"]
        return {k: v[int(idx[0]) : int(idx[-1]) + 1] for k, v in outputs.items()}

    index = {"sample": np.arange(samples)}
    return run_dataset(sliced, index, samples, batch_size or 4096, accumulators, golden_outputs=golden_outputs,
                       label=label, sink=sink, new=new)
