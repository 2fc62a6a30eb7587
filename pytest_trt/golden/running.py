"""Running the golden dataset through an engine (or given outputs) into per-output streams.

Shared by check mode (:mod:`verifying`) and update mode (:mod:`updating`):
which streams exist, how each decides whether its output is class scores,
and how batches reach them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_trt.compare import distribution
from pytest_trt.errors import GoldenError
from pytest_trt.golden import feeds
from pytest_trt.golden.streaming import ArrayLike, OutputStream, run_dataset

if TYPE_CHECKING:
    from pytest_trt.golden.workflow import GoldenCheck


def baseline_of(baselines: Mapping[str, Any], output: str) -> distribution.DistributionBaseline | None:
    d = baselines.get(output, {}).get("distribution")
    return distribution.DistributionBaseline.from_dict(d) if d else None


def pre_streams(golden_outputs: Mapping[str, Any],
                make: Callable[[str, ArrayLike | None], OutputStream]) -> dict[str, OutputStream]:
    """One stream per golden output (made by :func:`stream_factory`)."""
    return {name: make(name, ds) for name, ds in golden_outputs.items()}


def stream_factory(
    baselines: Mapping[str, Any], declared: Callable[[str], bool | None], max_label: int | None, *, strict: bool
) -> Callable[[str, ArrayLike | None], OutputStream]:
    """Streams whose classifier decision is: declared, else the golden's recorded one, else detected."""
    def make(name: str, golden: ArrayLike | None) -> OutputStream:
        base = baseline_of(baselines, name)
        recorded = baselines.get(name, {})
        decision = declared(name)
        if decision is None and "classifier" in recorded:
            decision = bool(recorded["classifier"])
        elif decision is None and base is not None:  # goldens written before the decision was recorded
            decision = True
        return OutputStream(name, golden, logits=None if base is None else base.logits, strict=strict,
                            declared=decision, max_label=max_label)
    return make


def feed(check: GoldenCheck, engine: Any, outputs: Mapping[str, np.ndarray] | None, inputs: Mapping[str, Any],
         samples: int, batch_size: int | None, streams: dict[str, OutputStream], *,
         golden_outputs: Mapping[str, Any] | None, label: str,
         new_stream: Callable[[str, ArrayLike | None], OutputStream],
         sink: Callable[[int, Mapping[str, np.ndarray]], None] | None = None) -> dict[str, OutputStream]:
    """Stream the engine's (or the given) outputs into ``streams`` and ``sink``."""
    if engine is not None:
        feeds.validate(engine, inputs, label)
        return run_dataset(engine.run, inputs, samples, feeds.batch_size(engine, batch_size), streams,
                           golden_outputs=golden_outputs, label=label, sink=sink, new_stream=new_stream)
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
                       label=label, sink=sink, new_stream=new_stream)
