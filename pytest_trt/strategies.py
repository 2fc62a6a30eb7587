"""Hypothesis strategies over an engine's input space and a model's config space.

``engine_inputs(engine)`` draws ``{input name: array}`` dicts a property test
feeds to the engine: shapes anywhere inside an optimization profile's
min..max (shrinking toward the profile's *opt* shape, the one the engine was
tuned for), dtypes from the engine's inputs, values from a range you give, the
golden dataset's observed range, or the calibration data's range.

``build_configs(onnx)`` draws valid :class:`~pytest_trt.config.BuildConfig`
objects for one model (profiles, optimization levels, ONNX Runtime options)
for config-space tests.

This is the only module of pytest-trt that imports hypothesis; the plugin
never imports it.
"""

from __future__ import annotations

import glob
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - hypothesis is in the test extra
    raise ImportError("pytest_trt.strategies needs hypothesis: pip install 'pytest-trt[hypothesis]'") from exc

from pytest_trt.backends.base import TensorSpec
from pytest_trt.config import BuildConfig, OrtOptions, Profile
from pytest_trt.errors import ConfigError, EngineNotRunnable, TrtError

__all__ = [
    "DEFAULT_RANGE",
    "ValueRange",
    "build_configs",
    "calibration_range",
    "engine_inputs",
    "golden_range",
    "input_specs",
]

#: values drawn for float inputs when no range is given
DEFAULT_RANGE = (-1.0, 1.0)
#: how a drawn array is filled; hypothesis shrinks toward the first ("constant": one value everywhere)
FILL_MODES = ("constant", "uniform", "extremes")


@dataclass(frozen=True)
class ValueRange:
    """Closed interval ``[low, high]`` of one input's values; ``source`` says where it came from."""

    low: float
    high: float
    source: str = "given"

    def __post_init__(self) -> None:
        if not np.isfinite(self.low) or not np.isfinite(self.high) or self.low > self.high:
            raise TrtError(f"value range [{self.low}, {self.high}] ({self.source}) must be finite with low <= high")


def golden_range(dataset: Any) -> dict[str, ValueRange]:
    """Per input, the min..max observed in a golden dataset (a ``GoldenDataset`` or ``{name: array}``)."""
    arrays = dataset.inputs if hasattr(dataset, "inputs") else dataset
    return {name: ValueRange(float(np.min(a)), float(np.max(a)), "golden dataset") for name, a in arrays.items()}


def calibration_range(config: BuildConfig) -> dict[str, ValueRange]:
    """Per input, the min..max of the config's calibration batches (``Calibration.data``, a glob of ``.npy``/``.npz``).

    A ``.npy`` batch belongs to the model's only input; an ``.npz`` names its inputs.
    """
    cal = config.calibration
    if cal is None or not cal.data:
        raise TrtError(
            f"BuildConfig {config.name!r} has no calibration data (calibration.data is unset); "
            f"pass elements=(low, high) or golden_range(dataset) instead"
        )
    pattern = cal.data if Path(cal.data).is_absolute() else str(config.onnx.parent / cal.data)
    files = sorted(glob.glob(pattern))
    if not files:
        raise TrtError(f"BuildConfig {config.name!r}: calibration.data {cal.data!r} matches no file ({pattern})")
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    for path in files:
        loaded = np.load(path)
        arrays = dict(loaded.items()) if hasattr(loaded, "files") else {"": loaded}
        for name, arr in arrays.items():
            lows[name] = min(lows.get(name, np.inf), float(np.min(arr)))
            highs[name] = max(highs.get(name, -np.inf), float(np.max(arr)))
    return {name: ValueRange(lows[name], highs[name], f"calibration data {cal.data}") for name in lows}


def input_specs(engine: Any) -> tuple[TensorSpec, ...]:
    """The engine's inputs (name, dtype, dims): from its runner, else from the ONNX model where it cannot run here."""
    try:
        return tuple(engine.runner.inputs)
    except EngineNotRunnable:
        return _onnx_input_specs(engine.config.onnx)


def _onnx_input_specs(path: Path) -> tuple[TensorSpec, ...]:
    import onnx
    from onnx import helper

    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).name
        dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim)
        specs.append(TensorSpec(vi.name, dtype, dims))
    return tuple(specs)


def _ranges_of(profile: Profile) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    return {r.name: (r.min, r.opt, r.max) for r in profile.inputs}


def _fixed_ranges(specs: Sequence[TensorSpec], label: str) -> dict[str, Any]:
    ranges = {}
    for s in specs:
        if -1 in s.shape:
            raise TrtError(
                f"{label}: input {s.name!r} has dynamic dims {s.shape} and the config has no optimization profile "
                f"to draw them from; add profiles to the BuildConfig or pass profile=Profile(...)"
            )
        ranges[s.name] = (s.shape, s.shape, s.shape)
    return ranges


def _dims(draw: Any, ranges: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Draw one shape per input; an axis 0 with the same range for every input (a batch) is drawn once."""
    firsts = {(r[0][0], r[1][0], r[2][0]) for r in ranges.values() if r[0]}
    shared = None
    if len(firsts) == 1:
        lo, opt, hi = firsts.pop()
        shared = opt + draw(st.integers(lo - opt, hi - opt))  # integers shrink toward 0: the opt dim
    shapes = {}
    for name, (lo_s, opt_s, hi_s) in sorted(ranges.items()):
        dims = []
        for axis, (lo, opt, hi) in enumerate(zip(lo_s, opt_s, hi_s, strict=True)):
            if axis == 0 and shared is not None:
                dims.append(shared)
            else:
                dims.append(opt + draw(st.integers(lo - opt, hi - opt)))
        shapes[name] = tuple(dims)
    return shapes


def _resolve_elements(elements: Any, specs: Sequence[TensorSpec], label: str) -> dict[str, ValueRange | None]:
    names = [s.name for s in specs]
    if elements is None:
        return dict.fromkeys(names)
    if isinstance(elements, ValueRange):
        return dict.fromkeys(names, elements)
    if isinstance(elements, tuple) and len(elements) == 2 and all(isinstance(v, (int, float)) for v in elements):
        return dict.fromkeys(names, ValueRange(float(elements[0]), float(elements[1])))
    if isinstance(elements, Mapping):
        unknown = [k for k in elements if k not in names]
        if unknown:
            raise TrtError(f"{label}: elements names unknown input(s) {unknown}; the engine's inputs are {names}")
        return {n: _as_range(elements.get(n), label) for n in names}
    raise TrtError(
        f"{label}: elements={elements!r} is not a value range; give (low, high), {{input: (low, high)}}, "
        f"golden_range(dataset) or calibration_range(config)"
    )


def _as_range(value: Any, label: str) -> ValueRange | None:
    if value is None or isinstance(value, ValueRange):
        return value
    try:
        low, high = value
        return ValueRange(float(low), float(high))
    except (TypeError, ValueError):
        raise TrtError(f"{label}: {value!r} is not a (low, high) value range") from None


def _fill(draw: Any, spec: TensorSpec, shape: tuple[int, ...], rng: ValueRange | None) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    mode = draw(st.sampled_from(FILL_MODES))
    if dtype == np.bool_:
        if mode == "constant":
            return np.full(shape, draw(st.booleans()), dtype=np.bool_)
        gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        return gen.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo = int(np.ceil(rng.low)) if rng else max(int(info.min), -128)
        hi = int(np.floor(rng.high)) if rng else min(int(info.max), 127)
        if mode == "constant":
            return np.full(shape, draw(st.integers(lo, hi)), dtype=dtype)
        gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        if mode == "extremes":
            return np.where(gen.random(shape) < 0.5, lo, hi).astype(dtype)
        return gen.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    flo, fhi = (rng.low, rng.high) if rng else DEFAULT_RANGE
    if dtype == np.float16:  # keep the ends representable so a cast never leaves the range
        flo, fhi = float(np.float16(flo)), float(np.float16(fhi))
    if mode == "constant":
        width = 16 if dtype == np.float16 else 32 if dtype == np.float32 else 64
        value = draw(st.floats(flo, fhi, width=width, allow_nan=False, allow_infinity=False))  # type: ignore[arg-type]
        return np.full(shape, value, dtype=dtype)
    gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if mode == "extremes":
        return np.where(gen.random(shape) < 0.5, flo, fhi).astype(dtype)
    return np.clip(gen.uniform(flo, fhi, size=shape), flo, fhi).astype(dtype)


def engine_inputs(engine: Any, profile: int | Profile | None = None, elements: Any = None) -> Any:
    """A strategy of input dicts for ``engine`` (an :class:`~pytest_trt.engines.engine.Engine`).

    ``profile``: the index of one of the config's profiles, a ``Profile``, or
    None to draw among the config's profiles (shrinking toward profile 0).
    Every drawn shape lies inside the profile's min..max and shrinks toward
    its opt shape.  ``elements``: ``(low, high)`` for every input,
    ``{input: (low, high)}``, :func:`golden_range` or
    :func:`calibration_range`; default ``(-1, 1)`` for floats, -128..127 for
    integers.  An array is filled with one constant, uniform values, or only
    the two range ends; hypothesis shrinks toward the constant fill.
    """
    config: BuildConfig = engine.config
    label = getattr(engine, "label", config.name)
    specs = input_specs(engine)
    by_name = {s.name: s for s in specs}
    if isinstance(profile, Profile):
        choices = [_ranges_of(profile)]
    elif isinstance(profile, int):
        if not 0 <= profile < len(config.profiles):
            raise TrtError(f"{label}: profile={profile}, but the config has {len(config.profiles)} profile(s)")
        choices = [_ranges_of(config.profiles[profile])]
    elif profile is None:
        choices = [_ranges_of(p) for p in config.profiles] or [_fixed_ranges(specs, label)]
    else:
        raise TrtError(f"{label}: profile must be an index, a Profile or None, got {profile!r}")
    for ranges in choices:
        missing = set(by_name) - set(ranges)
        extra = set(ranges) - set(by_name)
        if missing or extra:
            raise TrtError(f"{label}: the profile names {sorted(ranges)}, the engine's inputs are {sorted(by_name)}")
    values = _resolve_elements(elements, specs, label)

    @st.composite
    def draw_inputs(draw: Any) -> dict[str, np.ndarray]:
        ranges = choices[draw(st.integers(0, len(choices) - 1))] if len(choices) > 1 else choices[0]
        shapes = _dims(draw, ranges)
        return {name: _fill(draw, by_name[name], shapes[name], values[name]) for name in sorted(shapes)}

    return draw_inputs()


def build_configs(
    onnx: str | Path,
    *,
    name: str = "drawn",
    backend: str = "onnxruntime",
    max_dim: int = 8,
    max_profiles: int = 2,
    ort_levels: Sequence[str] = ("disabled", "basic", "extended", "all"),
) -> Any:
    """A strategy of valid BuildConfigs for the model ``onnx``.

    Dynamic dims of the model's inputs get profiles with 1 <= min <= opt <= max
    <= ``max_dim`` (fixed dims stay fixed), 1 to ``max_profiles`` profiles.
    ``backend="onnxruntime"`` draws ``OrtOptions`` (graph optimization level,
    1 or 2 intra-op threads); ``"tensorrt"`` / ``"tensorrt-rtx"`` draw
    ``builder_optimization_level`` 0..5.
    """
    path = Path(onnx)
    if not path.is_file():
        raise ConfigError(f"build_configs: ONNX file {str(path)!r} does not exist", field="onnx")
    specs = _onnx_input_specs(path)
    from pytest_trt.backends import registry

    spec = registry.find(backend)
    if spec is None:
        raise TrtError(f"build_configs: backend={backend!r}; choose one of {', '.join(registry.names())}")
    draws_ort = spec.options_field == "ort"  # the backend reads OrtOptions; the others TensorRT builder settings

    def one_range(draw: Any, dims: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        triples = [
            (d, d, d) if d != -1 else tuple(sorted(draw(st.lists(st.integers(1, max_dim), min_size=3, max_size=3))))
            for d in dims
        ]
        return tuple(tuple(t[k] for t in triples) for k in range(3))

    @st.composite
    def draw_config(draw: Any) -> BuildConfig:
        dynamic = any(-1 in s.shape for s in specs)
        n = draw(st.integers(1, max_profiles)) if dynamic else 0
        profiles = [Profile({s.name: one_range(draw, s.shape) for s in specs}) for _ in range(n)]
        if draws_ort:
            ort = OrtOptions(graph_optimization_level=draw(st.sampled_from(list(ort_levels))),
                             intra_op_threads=draw(st.integers(1, 2)))
            return BuildConfig(name=name, onnx=path, profiles=tuple(profiles), ort=ort)
        level = draw(st.integers(0, 5))
        return BuildConfig(name=name, onnx=path, profiles=tuple(profiles), builder_optimization_level=level)

    return draw_config()
