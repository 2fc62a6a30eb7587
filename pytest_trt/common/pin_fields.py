"""The normalisers of :class:`~pytest_trt.config.BuildConfig`'s fields: each takes what a user wrote and returns the
canonical value (sorted, unique, in bytes) or raises :class:`~pytest_trt.errors.ConfigError` naming the field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_trt.common.profile import Profile
from pytest_trt.common.units import parse_size
from pytest_trt.errors import ConfigError

#: Memory pools by the short names users write; values are ``MemoryPoolType`` members.
MEMORY_POOLS = {
    "workspace": "WORKSPACE",
    "dla_managed_sram": "DLA_MANAGED_SRAM",
    "dla_local_dram": "DLA_LOCAL_DRAM",
    "dla_global_dram": "DLA_GLOBAL_DRAM",
    "tactic_dram": "TACTIC_DRAM",
    "tactic_shared_memory": "TACTIC_SHARED_MEMORY",
}

_FLAG_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_COMPUTE_CAPABILITY = re.compile(r"^SM\d{2,3}$")


def profiles_of(value: Any) -> tuple[Profile, ...]:
    """BuildConfig.profiles as a tuple of Profiles naming the same inputs (one Profile alone is accepted)."""
    profiles = (value,) if isinstance(value, Profile) else tuple(value)
    for p in profiles:
        if not isinstance(p, Profile):
            raise ConfigError(f"BuildConfig.profiles must hold Profile objects, got {p!r}", field="profiles")
    if profiles and len({p.names() for p in profiles}) != 1:
        raise ConfigError("BuildConfig.profiles: every profile must name the same inputs", field="profiles")
    return profiles


def memory_pools_of(value: Mapping[str, Any]) -> dict[str, int]:
    """BuildConfig.memory_pool_limits in bytes, known pools only, sorted by name."""
    pools: dict[str, int] = {}
    for key, raw in dict(value).items():
        if key not in MEMORY_POOLS:
            raise ConfigError(
                f"BuildConfig.memory_pool_limits: unknown pool {key!r}; choose from {', '.join(MEMORY_POOLS)}",
                field="memory_pool_limits",
            )
        try:
            pools[key] = parse_size(raw)
        except ValueError as exc:
            raise ConfigError(f"BuildConfig.memory_pool_limits[{key!r}]: {exc}", field="memory_pool_limits") from None
    return dict(sorted(pools.items()))


def builder_flags_of(value: str | Sequence[str]) -> tuple[str, ...]:
    """BuildConfig.flags as sorted unique flag names; precision is set with ``precision=``, not with flags."""
    flags = (value,) if isinstance(value, str) else tuple(value)
    for f in flags:
        if not isinstance(f, str) or not _FLAG_NAME.match(f):
            raise ConfigError(
                f"BuildConfig.flags: {f!r} is not a builder flag name (use names like 'STRICT_NANS', not integers)",
                field="flags",
            )
    if {"FP16", "INT8", "BF16", "FP8"} & set(flags):
        raise ConfigError(
            "BuildConfig.flags: set precision with precision='fp16'/'int8'/..., not with precision flags",
            field="flags",
        )
    return tuple(sorted(set(flags)))


def compute_capabilities_of(value: str | Sequence[str]) -> tuple[str, ...]:
    """BuildConfig.compute_capabilities as sorted unique names like ``SM89``."""
    caps = tuple(c.upper() for c in ((value,) if isinstance(value, str) else value))
    for c in caps:
        if not _COMPUTE_CAPABILITY.match(c):
            raise ConfigError(f"BuildConfig.compute_capabilities: {c!r} is not like 'SM89' or 'SM120'",
                              field="compute_capabilities")
    return tuple(sorted(set(caps)))
