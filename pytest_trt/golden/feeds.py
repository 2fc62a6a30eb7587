"""Whether the golden dataset fits the engine, and how many samples to feed at once.

Checked before the first batch runs, so a mismatch names the input and both
shapes or dtypes instead of surfacing as a backend error mid-run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_trt.compare.accumulate import ArrayLike
from pytest_trt.errors import GoldenError

DEFAULT_BATCH = 64


def batch_size(engine: Any, requested: int | None) -> int:
    """``requested``, else the largest batch every input's first profile allows, else :data:`DEFAULT_BATCH`."""
    if requested is not None:
        if requested < 1:
            raise GoldenError(f"batch_size must be >= 1, got {requested}")
        return requested
    profiles = getattr(getattr(engine, "config", None), "profiles", ()) or ()
    maxes = [r.max[0] for r in profiles[0].inputs if r.max] if profiles else []
    return max(1, min(maxes)) if maxes else DEFAULT_BATCH


def _specs(engine: Any) -> dict[str, Any]:
    # Engines that expose TensorSpec-like ``inputs`` (name, dtype, shape) are checked exactly.
    specs = getattr(engine, "inputs", None)
    if specs is None:
        try:  # pytest_trt.engines.engine.Engine keeps them on its runner
            specs = engine.runner.inputs
        except Exception:  # not runnable here: run() raises the backend's own reason
            return {}
    if not specs or isinstance(specs, Mapping):
        return {}
    try:
        return {s.name: s for s in specs}
    except AttributeError:
        return {}


def validate(engine: Any, inputs: Mapping[str, ArrayLike], label: str) -> None:
    """Raise :class:`GoldenError` naming the first input whose name, dtype or shape cannot run."""
    specs = _specs(engine)
    profiles = getattr(getattr(engine, "config", None), "profiles", ()) or ()
    expected = set(specs) or (set(profiles[0].names()) if profiles else set())
    if expected and expected != set(inputs):
        raise GoldenError(
            f"{label}: the golden dataset has inputs {sorted(inputs)}, the engine takes {sorted(expected)}",
            inputs=sorted(inputs),
        )
    for name, arr in inputs.items():
        sample = tuple(arr.shape[1:])
        spec = specs.get(name)
        if spec is not None:
            if np.dtype(spec.dtype) != np.dtype(arr.dtype):
                raise GoldenError(
                    f"{label}: golden input {name!r} is {np.dtype(arr.dtype).name}, the engine takes "
                    f"{np.dtype(spec.dtype).name}; convert the golden dataset (and refresh with approval)",
                    input=name,
                )
            want = tuple(spec.shape[1:])
            fixed = len(want) == len(sample) and all(
                w in (-1, s) or w is None for w, s in zip(want, sample, strict=True))
            if not fixed:
                raise GoldenError(
                    f"{label}: golden input {name!r} has samples of shape {sample}, the engine takes "
                    f"{tuple(spec.shape)} (-1 = any)", input=name,
                )
        for profile in profiles[:1]:
            r = profile[name]
            lo, hi = tuple(r.min[1:]), tuple(r.max[1:])
            if len(lo) != len(sample) or any(not a <= s <= b for a, s, b in zip(lo, sample, hi, strict=True)):
                raise GoldenError(
                    f"{label}: golden input {name!r} has samples of shape {sample}, outside the profile's "
                    f"per-sample range {lo}..{hi}", input=name,
                )
