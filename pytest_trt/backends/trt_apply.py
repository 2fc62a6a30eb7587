"""Apply a BuildConfig to a TensorRT builder config, and read back what took effect.

The read-back is the "effective config" recorded with every engine; any
difference from what the pin asked is an error, so a builder that silently
ignores a setting cannot slip through.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pytest_trt.backends.trt_features import Features
from pytest_trt.config import MEMORY_POOLS, BuildConfig
from pytest_trt.errors import BuildFailed, ConfigError


@dataclass(frozen=True)
class Configured:
    """A builder config set exactly as pinned, and what was read back from it."""

    builder_config: Any
    profiles: list[Any]
    timing_cache: Any  # None without a timing cache
    effective: dict[str, Any]
    #: sha256 of the timing cache bytes the build starts from (None: no timing cache pinned, or no file yet)
    timing_cache_sha256: str | None = None


def configure(
    trt: Any, f: Features, builder: Any, network: Any, config: BuildConfig, flags: tuple[str, ...]
) -> Configured:
    """Check the network's inputs against the profiles, make and set the builder config, read it back.

    ``flags`` are the builder flags the pin asks for (its precision's and its own), set exactly and read back.
    One call, so a setting the builder silently ignores fails here, before any build time is spent.
    """
    check_network_inputs(network, config)
    bc = builder.create_builder_config()
    profiles, cache, cache_sha256 = apply_config(trt, f, builder, bc, network, config, flags)
    return Configured(bc, profiles, cache, read_back(trt, f, bc, network, profiles, config, flags), cache_sha256)


def network_inputs(network: Any) -> dict[str, tuple[int, ...]]:
    return {network.get_input(i).name: tuple(network.get_input(i).shape) for i in range(network.num_inputs)}


def check_network_inputs(network: Any, config: BuildConfig) -> None:
    """Profiles must name the network's inputs with matching ranks and fixed dims."""
    inputs = network_inputs(network)
    expected = ", ".join(f"{n} {list(s)}" for n, s in inputs.items())
    dynamic = [n for n, s in inputs.items() if any(d < 0 for d in s)]
    where = f"BuildConfig {config.name!r} ({config.onnx.name})"
    if not config.profiles:
        if dynamic:
            n = dynamic[0]
            raise ConfigError(
                f"{where}: input {n!r} has dynamic shape {list(inputs[n])}; add "
                f"profiles=[Profile({{{n!r}: (min, opt, max)}})]. The network's inputs: {expected}",
                field="profiles",
            )
        return
    for k, profile in enumerate(config.profiles):
        names = set(profile.names())
        unknown = names - set(inputs)
        if unknown:
            raise ConfigError(
                f"{where}: profile {k} names input {sorted(unknown)[0]!r}, which the network does not have; "
                f"its inputs are: {expected}",
                field="profiles",
            )
        for n in dynamic:
            if n not in names:
                raise ConfigError(
                    f"{where}: profile {k} gives no shapes for dynamic input {n!r} {list(inputs[n])}", field="profiles"
                )
        for r in profile.inputs:
            shape = inputs[r.name]
            if len(r.min) != len(shape):
                raise ConfigError(
                    f"{where}: profile {k} input {r.name!r} has rank {len(r.min)}, the network's has rank "
                    f"{len(shape)} {list(shape)}",
                    field="profiles",
                )
            for axis, d in enumerate(shape):
                if d >= 0 and not (r.min[axis] == r.opt[axis] == r.max[axis] == d):
                    raise ConfigError(
                        f"{where}: profile {k} input {r.name!r} axis {axis} is fixed at {d} in the network "
                        f"{list(shape)}, but the profile asks {r.min[axis]}/{r.opt[axis]}/{r.max[axis]}",
                        field="profiles",
                    )


def apply_config(
    trt: Any, f: Features, builder: Any, bc: Any, network: Any, config: BuildConfig, flags: tuple[str, ...]
) -> tuple[list[Any], Any, str | None]:
    """Configure ``bc`` exactly as pinned; return (optimization profiles, timing cache or None, the sha256 of the
    timing cache file it was made from, None without one)."""
    bc.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    # Pin the flag set exactly: TensorRT turns TF32 on by default, which a pin must state.
    for name in f.builder_flags:
        member = getattr(trt.BuilderFlag, name)
        if bc.get_flag(member):
            bc.clear_flag(member)
    for name in flags:
        bc.set_flag(getattr(trt.BuilderFlag, name))
    for pool, limit in config.memory_pool_limits.items():
        bc.set_memory_pool_limit(getattr(trt.MemoryPoolType, MEMORY_POOLS[pool]), limit)
    if config.builder_optimization_level is not None:
        bc.builder_optimization_level = config.builder_optimization_level
    if config.compute_capabilities:
        bc.num_compute_capabilities = len(config.compute_capabilities)
        for i, cc in enumerate(config.compute_capabilities):
            bc.set_compute_capability(getattr(trt.ComputeCapability, cc), i)
    if config.hardware_compatibility_level is not None and f.has_hardware_compatibility:
        bc.hardware_compatibility_level = getattr(trt.HardwareCompatibilityLevel, config.hardware_compatibility_level)
    profiles = []
    for p in config.profiles:
        profile = builder.create_optimization_profile()
        for r in p.inputs:
            profile.set_shape(r.name, r.min, r.opt, r.max)
        if bc.add_optimization_profile(profile) < 0:
            raise ConfigError(f"BuildConfig {config.name!r}: TensorRT rejected profile {p!r}", field="profiles")
        profiles.append(profile)
    cache = None
    cache_sha256 = None
    if config.timing_cache is not None:
        data = config.timing_cache.read_bytes() if config.timing_cache.is_file() else b""
        cache_sha256 = hashlib.sha256(data).hexdigest() if config.timing_cache.is_file() else None
        cache = bc.create_timing_cache(data)
        if cache is None or not bc.set_timing_cache(cache, False):
            raise ConfigError(
                f"BuildConfig {config.name!r}: timing cache {str(config.timing_cache)!r} cannot be loaded "
                "(corrupt, or from another TensorRT version/GPU): delete it to start a new one",
                field="timing_cache",
            )
    return profiles, cache, cache_sha256


def read_back(
    trt: Any, f: Features, bc: Any, network: Any, profiles: list[Any], config: BuildConfig, flags: tuple[str, ...]
) -> dict[str, Any]:
    """Read the builder config back; raise BuildFailed when it differs from the pin."""
    set_flags = sorted(n for n in f.builder_flags if bc.get_flag(getattr(trt.BuilderFlag, n)))
    pools = {
        p: int(bc.get_memory_pool_limit(getattr(trt.MemoryPoolType, MEMORY_POOLS[p])))
        for p in config.memory_pool_limits
    }
    effective: dict[str, Any] = {
        "backend": f.backend_name,
        "backend_version": f.version,
        "precision": config.precision,
        "flags": set_flags,
        "memory_pool_limits": pools,
        "profiling_verbosity": _name(bc.profiling_verbosity),
        "profiles": [
            {n: [list(s) for s in prof.get_shape(n)] for n in p.names()}
            for prof, p in zip(profiles, config.profiles, strict=True)
        ],
        "num_optimization_profiles": int(bc.num_optimization_profiles),
        "strongly_typed": f.strongly_typed_only or _network_flag(trt, network, "STRONGLY_TYPED"),
        "timing_cache": config.timing_cache is not None,
    }
    if f.has_optimization_level:
        effective["builder_optimization_level"] = int(bc.builder_optimization_level)
    if hasattr(bc, "num_compute_capabilities"):
        effective["compute_capabilities"] = sorted(
            _name(bc.get_compute_capability(i)) for i in range(bc.num_compute_capabilities)
        )
    if f.has_hardware_compatibility:  # never hasattr(): reading it on TensorRT-RTX logs warnings and errors
        effective["hardware_compatibility_level"] = _name(bc.hardware_compatibility_level)
    diffs = _differences(f, config, effective, flags)
    if diffs:
        raise BuildFailed(
            f"BuildConfig {config.name!r}: the builder did not take the pinned settings:\n  " + "\n  ".join(diffs),
            config_name=config.name,
            stage="config",
        )
    return effective


def _differences(f: Features, config: BuildConfig, eff: dict[str, Any], flags: tuple[str, ...]) -> list[str]:
    diffs = []
    want_flags = list(flags)
    if eff["flags"] != want_flags:
        diffs.append(f"flags: asked {want_flags}, builder has {eff['flags']}")
    if eff["memory_pool_limits"] != dict(config.memory_pool_limits):
        diffs.append(
            f"memory_pool_limits: asked {dict(config.memory_pool_limits)}, builder has {eff['memory_pool_limits']}"
        )
    if eff["profiling_verbosity"] != "DETAILED":
        diffs.append(f"profiling_verbosity: asked DETAILED, builder has {eff['profiling_verbosity']}")
    level = config.builder_optimization_level
    if level is not None and eff.get("builder_optimization_level") != level:
        diffs.append(f"builder_optimization_level: asked {level}, builder has {eff.get('builder_optimization_level')}")
    if config.compute_capabilities and eff.get("compute_capabilities") != sorted(config.compute_capabilities):
        diffs.append(
            f"compute_capabilities: asked {list(config.compute_capabilities)}, "
            f"builder has {eff.get('compute_capabilities')}"
        )
    hw = config.hardware_compatibility_level
    if hw is not None and f.has_hardware_compatibility and eff.get("hardware_compatibility_level") != hw:
        diffs.append(f"hardware_compatibility_level: asked {hw}, builder has {eff.get('hardware_compatibility_level')}")
    for k, p in enumerate(config.profiles):
        got = eff["profiles"][k]
        for r in p.inputs:
            want = [list(r.min), list(r.opt), list(r.max)]
            if got.get(r.name) != want:
                diffs.append(f"profile {k} input {r.name!r}: asked {want}, builder has {got.get(r.name)}")
    return diffs


def _name(value: Any) -> str:
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else str(value).rsplit(".", 1)[-1]


def _network_flag(trt: Any, network: Any, name: str) -> bool:
    member = getattr(trt.NetworkDefinitionCreationFlag, name, None)
    try:
        return bool(member is not None and network.get_flag(member))
    except Exception:
        return False
