"""Input checking and batching for ``Engine.run``, shared by every backend's runner.

Feeds are checked by name, rank, dtype (never cast: a float64 array given to
a float32 input is an error that says so) and shape: within one of the
config's optimization profiles (min..max per axis) or, without profiles, the
engine's own fixed dims.  A batch larger than the profile's max batch is
split along axis 0 into near-equal chunks and the outputs are concatenated.
Nothing here imports a backend library.

The checks run on every call, so what can be computed once per (runner,
config) is kept in a :class:`_Plan` cached weakly on the runner.
"""

from __future__ import annotations

import difflib
import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_trt.errors import InputMismatch

if TYPE_CHECKING:
    from pytest_trt.backends.base import Runner
    from pytest_trt.config import BuildConfig

__all__ = ["expected_inputs_text", "run_checked"]

Range = tuple[tuple[int, ...], tuple[int, ...]]  # (min, max) shape


@dataclass(frozen=True)
class _Input:
    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]  # engine dims, -1 = dynamic
    ranges: tuple[Range | None, ...]  # per profile; None: the profile does not name this input


@dataclass(frozen=True)
class _Plan:
    inputs: tuple[_Input, ...]
    by_name: dict[str, _Input]
    names: frozenset[str]
    n_profiles: int
    batched_outputs: bool  # every output has a dynamic axis 0, so chunks concatenate
    #: signatures (name, shape, dtype per feed) already checked and run unsplit; bounded
    accepted: set[tuple[tuple[str, tuple[int, ...], np.dtype[Any]], ...]] = field(default_factory=set)

    def fits(self, name: str, shape: tuple[int, ...], profile: int | None) -> bool:
        inp = self.by_name[name]
        rng = inp.ranges[profile] if profile is not None else None
        if rng is None:
            fixed = inp.shape
            return len(shape) == len(fixed) and all(e == -1 or e == d for e, d in zip(fixed, shape, strict=True))
        lo, hi = rng
        return len(shape) == len(lo) and all(a <= d <= b for a, d, b in zip(lo, shape, hi, strict=True))


_MAX_SIGNATURES = 256
_PLANS: weakref.WeakKeyDictionary[Any, tuple[BuildConfig, _Plan]] = weakref.WeakKeyDictionary()


def _plan(runner: Runner, config: BuildConfig) -> _Plan:
    try:
        cached = _PLANS.get(runner)
    except TypeError:  # runner not weak-referenceable: no caching
        cached = None
    if cached is not None and cached[0] is config:
        return cached[1]
    inputs = []
    for spec in runner.inputs:
        ranges: list[Range | None] = []
        for profile in config.profiles:
            try:
                r = profile[spec.name]
                ranges.append((r.min, r.max))
            except KeyError:
                ranges.append(None)
        inputs.append(_Input(spec.name, np.dtype(spec.dtype), tuple(spec.shape), tuple(ranges)))
    batched = all(len(o.shape) > 0 and o.shape[0] == -1 for o in runner.outputs)
    plan = _Plan(tuple(inputs), {i.name: i for i in inputs}, frozenset(i.name for i in inputs),
                 len(config.profiles), batched)
    try:
        _PLANS[runner] = (config, plan)
    except TypeError:
        pass
    return plan


def _dims_text(inp: _Input, rng: Range | None) -> str:
    if rng is None:
        return "[" + ", ".join("*" if d == -1 else str(d) for d in inp.shape) + "]"
    lo, hi = rng
    return "[" + ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in zip(lo, hi, strict=True)) + "]"


def expected_inputs_text(runner: Runner, config: BuildConfig) -> str:
    """What the engine expects, one input per line: name, dtype, shape per profile (``a..b`` = range, ``*`` = any)."""
    plan = _plan(runner, config)
    lines = [f"the engine expects {len(plan.inputs)} input(s):"]
    for inp in plan.inputs:
        if plan.n_profiles:
            shapes = " or ".join(
                f"{_dims_text(inp, r)}" + (f" (profile {k})" if plan.n_profiles > 1 else "")
                for k, r in enumerate(inp.ranges)
            )
        else:
            shapes = _dims_text(inp, None)
        lines.append(f"  {inp.name}: {inp.dtype.name} {shapes}")
    return "\n".join(lines)


def _fitting_profile(plan: _Plan, shapes: dict[str, tuple[int, ...]]) -> int | None | bool:
    """Index of the first profile every input fits; None when fitting the engine dims without profiles; False: none."""
    if not plan.n_profiles:
        return None if all(plan.fits(n, s, None) for n, s in shapes.items()) else False
    for k in range(plan.n_profiles):
        if all(plan.fits(n, s, k) for n, s in shapes.items()):
            return k
    return False


def _problems(plan: _Plan, feeds: Mapping[str, Any]) -> list[str]:
    """Every name, type, rank and dtype problem of ``feeds``, as sentences."""
    out: list[str] = []
    unknown = [n for n in feeds if n not in plan.names]
    for n in unknown:
        close = difflib.get_close_matches(str(n), sorted(plan.names), n=1)
        out.append(f"unknown input {n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    missing = sorted(plan.names - set(feeds))
    if missing:
        out.append(f"missing input(s) {', '.join(repr(n) for n in missing)}")
    for inp in plan.inputs:
        arr = feeds.get(inp.name)
        if arr is None:
            continue
        if not isinstance(arr, np.ndarray):
            out.append(f"input {inp.name!r} is a {type(arr).__name__}, not a numpy array "
                       f"(pass np.asarray(value, dtype=np.{inp.dtype.name}))")
            continue
        if arr.ndim != len(inp.shape):
            out.append(f"input {inp.name!r} has rank {arr.ndim} (shape {tuple(arr.shape)}), "
                       f"the engine expects rank {len(inp.shape)}")
        if arr.dtype != inp.dtype:
            # a byte-swapped float32 has the name float32 too: show its type string then
            got = arr.dtype.name if arr.dtype.name != inp.dtype.name else arr.dtype.str
            out.append(f"input {inp.name!r} has dtype {got}, the engine expects {inp.dtype.name} "
                       f"(inputs are never cast: convert with .astype(np.{inp.dtype.name}))")
    return out


def _shape_problems(plan: _Plan, shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """Which axes of which inputs are out of range (per profile when there are several)."""
    out: list[str] = []
    for k in range(plan.n_profiles) if plan.n_profiles else [None]:
        where = "" if k is None or plan.n_profiles == 1 else f" of profile {k}"
        for name, shape in shapes.items():
            inp = plan.by_name[name]
            rng = inp.ranges[k] if k is not None else None
            lo, hi = rng if rng is not None else (inp.shape, inp.shape)
            for axis, (d, a, b) in enumerate(zip(shape, lo, hi, strict=False)):
                if a == -1 or a <= d <= b or (axis == 0 and d > b and rng is not None and plan.batched_outputs):
                    continue  # in range, or a batch above max, which is split
                allowed = f"the range {a}..{b}" if a != b else f"{a}"
                source = "profile" + where if rng is not None else "engine's fixed dim"
                out.append(f"input {name!r} has shape {shape}: axis {axis} is {d}, outside the {source} ({allowed})")
    return out or [f"shapes {shapes} fit no optimization profile as a whole"]


def _split_plan(plan: _Plan, shapes: dict[str, tuple[int, ...]]) -> tuple[list[int], str | None]:
    """Chunk sizes along axis 0 for a batch beyond every profile's max, or ([], why it cannot split)."""
    batches = {s[0] for s in shapes.values() if s}
    if len(batches) != 1 or not plan.n_profiles:
        return [], None
    batch = batches.pop()
    best: tuple[int, int] | None = None  # (max batch, min batch) of the roomiest fitting profile
    for k in range(plan.n_profiles):
        maybe = [plan.by_name[n].ranges[k] for n in shapes]
        ranges = [r for r in maybe if r is not None]
        if len(ranges) != len(maybe) or any(batch <= r[1][0] for r in ranges):
            continue
        # the other axes must fit with the batch at this profile's max
        if all(plan.fits(n, (r[1][0], *s[1:]), k) for (n, s), r in zip(shapes.items(), ranges, strict=True)):
            hi = min(r[1][0] for r in ranges)
            lo = max(r[0][0] for r in ranges)
            if best is None or hi > best[0]:
                best = (hi, lo)
    if best is None:
        return [], None
    hi, lo = best
    if not plan.batched_outputs:
        return [], (f"batch {batch} exceeds the profile's max batch {hi} and an output has no dynamic batch axis "
                    "to join chunks on")
    n = math.ceil(batch / hi)
    sizes = [batch // n + (1 if i < batch % n else 0) for i in range(n)]
    if min(sizes) < lo:
        return [], f"batch {batch} cannot be split into chunks within the profile's batch range {lo}..{hi}"
    return sizes, None


def run_checked(runner: Runner, config: BuildConfig, feeds: Mapping[str, Any], *, label: str) -> dict[str, np.ndarray]:
    """Check ``feeds`` against the engine and the config's profiles, then run (splitting large batches).

    Raises :class:`~pytest_trt.errors.InputMismatch` naming every problem and
    listing what the engine expects.
    """
    __tracebackhide__ = True
    plan = _plan(runner, config)
    if type(feeds) is not dict and not isinstance(feeds, Mapping):  # the exact-type test skips the ABC check
        raise InputMismatch(
            f"{label}: Engine.run takes a mapping of input name to numpy array, got {type(feeds).__name__}\n"
            + expected_inputs_text(runner, config)
        )
    # Fast path: a call shaped like one already accepted costs one tuple and one set lookup.
    # Every Python line here runs with caches cold from the previous inference, so it is kept short.
    try:
        signature = tuple([(k, v.shape, v.dtype) for k, v in feeds.items()])
    except AttributeError:  # a value that is not an array: the slow path says which
        signature = None
    if signature in plan.accepted:
        return runner.run(feeds)
    if feeds.keys() == plan.names and signature is not None:
        shapes = {k: shape for k, shape, dtype in signature if dtype == plan.by_name[k].dtype}
        if len(shapes) == len(plan.inputs) and _fitting_profile(plan, shapes) is not False:
            if len(plan.accepted) < _MAX_SIGNATURES:
                plan.accepted.add(signature)
            return runner.run(feeds)
    problems = _problems(plan, feeds)
    if not problems:
        shapes = {i.name: feeds[i.name].shape for i in plan.inputs}
        sizes, why = _split_plan(plan, shapes)
        if sizes:
            return _run_split(runner, feeds, sizes)
        problems.extend([why] if why else _shape_problems(plan, shapes))
    raise InputMismatch(
        f"{label}: Engine.run inputs do not match the engine:\n"
        + "".join(f"  - {p}\n" for p in problems)
        + expected_inputs_text(runner, config)
    )


def _run_split(runner: Runner, feeds: Mapping[str, np.ndarray], sizes: list[int]) -> dict[str, np.ndarray]:
    parts: list[dict[str, np.ndarray]] = []
    start = 0
    for size in sizes:
        parts.append(runner.run({n: a[start : start + size] for n, a in feeds.items()}))
        start += size
    return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}
