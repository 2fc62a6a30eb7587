"""One profile spelling across backends in bundles: the spellings that differ between backends, made one.

TensorRT reads optimization profiles back as ``{input: [min, opt, max]}``; ONNX Runtime
(and every pinned config) writes ``{input: {"min": .., "opt": .., "max": ..}}``.  A bundle
keeps the latter for both, so a diff between backends, or between a pin and its effective
config, shows only real differences.  Values are never rounded here: rounding is for display.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_KEYS = ("min", "opt", "max")


def profile_shapes(value: Any) -> Any:
    """``[min, opt, max]`` -> ``{"min": min, "opt": opt, "max": max}``; any other value unchanged."""
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(s, (list, tuple)) for s in value):
        return {k: [int(d) for d in s] for k, s in zip(_KEYS, value, strict=True)}
    return value


def normalized_effective(effective: Mapping[str, Any]) -> dict[str, Any]:
    """The effective config with every profile in the ``{"min", "opt", "max"}`` form."""
    out = dict(effective)
    profiles = out.get("profiles")
    if isinstance(profiles, list):
        out["profiles"] = [{n: profile_shapes(s) for n, s in p.items()} if isinstance(p, Mapping) else p
                           for p in profiles]
    return out
