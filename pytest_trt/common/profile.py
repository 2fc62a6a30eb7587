"""Optimization profiles: :class:`Profile`, per input tensor its (min, opt, max) shapes, validated on construction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_trt.errors import ConfigError

Shape = tuple[int, ...]
#: the largest dimension a profile shape may have (TensorRT before 10 holds dimensions as 32-bit ints)
MAX_DIM = 2**31 - 1


def _shape(value: Any, where: str) -> Shape:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(f"{where}: expected a shape like (1, 3, 224, 224), got {value!r}", field="profiles")
    dims = tuple(value)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ConfigError(f"{where}: every dimension must be a non-negative int, got {value!r}", field="profiles")
        if d > MAX_DIM:
            raise ConfigError(f"{where}: dimension {d} in {value!r} is larger than {MAX_DIM} (2**31 - 1), more than "
                              "any engine input holds", field="profiles")
    return dims


@dataclass(frozen=True)
class InputRange:
    """min/opt/max shapes of one input tensor inside an optimization profile."""

    name: str
    min: Shape
    opt: Shape
    max: Shape


class Profile:
    """An optimization profile: per input tensor, its (min, opt, max) shapes.

    ``Profile(input=((1, 3, 224, 224), (8, 3, 224, 224), (32, 3, 224, 224)))``
    or, for tensor names that are not Python identifiers,
    ``Profile({"input.1": (min, opt, max)})``.  A fixed shape may be given
    once: ``Profile(input=(1, 3, 224, 224))``.
    """

    __slots__ = ("inputs",)
    inputs: tuple[InputRange, ...]

    def __init__(self, shapes: Mapping[str, Any] | None = None, /, **named: Any) -> None:
        merged: dict[str, Any] = dict(shapes or {})
        overlap = set(merged) & set(named)
        if overlap:
            raise ConfigError(f"Profile: input {sorted(overlap)[0]!r} given twice", field="profiles")
        merged.update(named)
        if not merged:
            raise ConfigError("Profile: name at least one input, e.g. Profile(input=(min, opt, max))", field="profiles")
        ranges = [self._range(name, spec) for name, spec in merged.items()]
        object.__setattr__(self, "inputs", tuple(sorted(ranges, key=lambda r: r.name)))

    @staticmethod
    def _range(name: str, spec: Any) -> InputRange:
        where = f"Profile input {name!r}"
        if isinstance(spec, Mapping):
            try:
                triple = (spec["min"], spec["opt"], spec["max"])
            except KeyError as exc:
                raise ConfigError(
                    f"{where}: missing key {exc.args[0]!r} (need min, opt, max)", field="profiles"
                ) from None
        elif isinstance(spec, Sequence) and spec and all(isinstance(d, int) for d in spec):
            triple = (spec, spec, spec)
        elif isinstance(spec, Sequence) and len(spec) == 3:
            triple = tuple(spec)
        else:
            raise ConfigError(
                f"{where}: expected (min, opt, max) shapes or one fixed shape, got {spec!r}", field="profiles"
            )
        lo, opt, hi = (_shape(s, where) for s in triple)
        if not (len(lo) == len(opt) == len(hi)):
            raise ConfigError(
                f"{where}: rank mismatch: min has rank {len(lo)}, opt {len(opt)}, max {len(hi)}", field="profiles"
            )
        for axis, (a, b, c) in enumerate(zip(lo, opt, hi, strict=True)):
            if a > b:
                raise ConfigError(f"{where}: min > opt at axis {axis} ({a} > {b})", field="profiles")
            if b > c:
                raise ConfigError(f"{where}: opt > max at axis {axis} ({b} > {c})", field="profiles")
        return InputRange(name, lo, opt, hi)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("Profile is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Profile) and self.inputs == other.inputs

    def __hash__(self) -> int:
        return hash(self.inputs)

    def __repr__(self) -> str:
        body = ", ".join(f"{r.name!r}: ({r.min}, {r.opt}, {r.max})" for r in self.inputs)
        return f"Profile({{{body}}})"

    def __getitem__(self, name: str) -> InputRange:
        for r in self.inputs:
            if r.name == name:
                return r
        raise KeyError(name)

    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.inputs)

    def to_json(self) -> dict[str, dict[str, list[int]]]:
        return {r.name: {"min": list(r.min), "opt": list(r.opt), "max": list(r.max)} for r in self.inputs}

