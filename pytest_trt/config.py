"""Pinned build configurations: :class:`BuildConfig`, :class:`Profile`, :class:`Calibration`.

A config is a pin: every field that can change an engine lives here, is
validated on construction, serialises to canonical JSON (sorted keys, flag
names rather than integers, which TensorRT 11 renumbered) and hashes to a
stable ``config_hash`` together with the ONNX file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_trt.common.fileio import sha256_file
from pytest_trt.common.units import parse_size
from pytest_trt.errors import ConfigError

#: Precisions a config may ask for.  ``typed`` means "take every precision from
#: the ONNX model's types" (strongly typed networks: TensorRT-RTX, TensorRT 11).
#: ``fp32`` means strict FP32: the TF32 flag TensorRT sets by default is cleared.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "best", "typed")

#: Memory pools by the short names users write; values are ``MemoryPoolType`` members.
MEMORY_POOLS = {
    "workspace": "WORKSPACE",
    "dla_managed_sram": "DLA_MANAGED_SRAM",
    "dla_local_dram": "DLA_LOCAL_DRAM",
    "dla_global_dram": "DLA_GLOBAL_DRAM",
    "tactic_dram": "TACTIC_DRAM",
    "tactic_shared_memory": "TACTIC_SHARED_MEMORY",
}

CALIBRATION_ALGORITHMS = ("entropy", "entropy2", "minmax", "legacy", "percentile", "distribution")
#: TensorRT <= 10 calibrator classes (implicit INT8), by algorithm name.
IMPLICIT_CALIBRATORS = ("entropy2", "entropy", "minmax", "legacy")
#: Explicit Q/DQ quantization methods (TensorRT-RTX, TensorRT 11, ONNX Runtime).
EXPLICIT_METHODS = ("minmax", "entropy", "percentile", "distribution")

_FLAG_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_COMPUTE_CAPABILITY = re.compile(r"^SM\d{2,3}$")
SCHEMA_VERSION = 1

Shape = tuple[int, ...]


def _shape(value: Any, where: str) -> Shape:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ConfigError(f"{where}: expected a shape like (1, 3, 224, 224), got {value!r}", field="profiles")
    dims = tuple(value)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ConfigError(f"{where}: every dimension must be a non-negative int, got {value!r}", field="profiles")
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


@dataclass(frozen=True)
class Calibration:
    """INT8 calibration, pinned: algorithm, data, batching, cache.

    ``algorithm``: ``entropy2``, ``entropy``, ``minmax``, ``legacy`` name the
    TensorRT <= 10 calibrators (implicit INT8); ``minmax``, ``entropy``,
    ``percentile``, ``distribution`` the explicit Q/DQ quantization that
    TensorRT-RTX, TensorRT 11 and ONNX Runtime build (ranges computed the way
    TensorRT's calibrators compute them, see :mod:`pytest_trt.calibration`).

    ``data``: a glob of ``.npy``/``.npz`` files (relative to the working
    directory, or to the TOML file), a ``GoldenDataset``, an HDF5 file
    (``.h5``/``.hdf5``) or a callable returning an iterable of batches
    (``{input name: array}``).  A ``labels`` array (npz key, HDF5 dataset,
    GoldenDataset labels) is counted per class, never fed.
    ``num_batches``: use only the first N batches (None: all).
    ``percentile``: for ``percentile`` only (default 99.999).
    ``per_channel``: per-output-channel weight scales (explicit quantization).
    ``cache``: TensorRT-format calibration cache path (read when it exists
    and was written by the same algorithm, written otherwise).
    ``cache_sha256``: pins that cache's bytes; a mismatch fails the build.

    The config hash covers every field and the calibration data's digest,
    not the data or cache *paths* (moving a repository keeps its pins).
    """

    algorithm: str = "entropy2"
    data: Any = None
    cache: str | Path | None = None
    batch_size: int = 1
    num_batches: int | None = None
    percentile: float | None = None
    per_channel: bool = False
    cache_sha256: str | None = None
    _digest: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"Calibration.{name}: {why}", field=f"calibration.{name}")

        if self.algorithm not in CALIBRATION_ALGORITHMS:
            raise ConfigError(f"Calibration.algorithm {self.algorithm!r} is unknown; choose one of "
                              f"{', '.join(CALIBRATION_ALGORITHMS)}", field="calibration.algorithm")
        for name in ("batch_size", "num_batches"):
            v = getattr(self, name)
            if v is None and name == "num_batches":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise bad(name, f"must be a positive int, got {v!r}")
        if self.percentile is not None:
            if self.algorithm != "percentile":
                raise bad("percentile", f"applies only to algorithm='percentile', not {self.algorithm!r}; remove it")
            if isinstance(self.percentile, bool) or not isinstance(self.percentile, (int, float)) or not (
                50.0 < float(self.percentile) <= 100.0
            ):
                raise bad("percentile", f"must be a number in (50, 100], like 99.99, got {self.percentile!r}")
            object.__setattr__(self, "percentile", float(self.percentile))
        if not isinstance(self.per_channel, bool):
            raise bad("per_channel", f"must be True or False, got {self.per_channel!r}")
        if self.per_channel and self.algorithm in IMPLICIT_CALIBRATORS and self.algorithm not in EXPLICIT_METHODS:
            raise bad("per_channel", f"applies to explicit Q/DQ quantization, not to the {self.algorithm} calibrator")
        if self.cache is not None:
            if not isinstance(self.cache, (str, Path)) or not str(self.cache):
                raise bad("cache", f"must be a file path, got {self.cache!r}")
            object.__setattr__(self, "cache", Path(self.cache))
        if self.cache_sha256 is not None:
            if not isinstance(self.cache_sha256, str) or not re.fullmatch(r"[0-9a-f]{64}", self.cache_sha256):
                raise bad("cache_sha256", f"must be 64 lowercase hex digits (sha256sum of the cache), got "
                          f"{self.cache_sha256!r}")
            if self.cache is None:
                raise bad("cache_sha256", "pins a cache file, so give cache= too")
        data = self.data
        if data is None:
            return
        if isinstance(data, Path):
            object.__setattr__(self, "data", str(data))
        elif not isinstance(data, str) and not callable(data) and not hasattr(data, "digest"):
            raise bad("data", f"expected a glob of .npy/.npz files, an HDF5 path, a GoldenDataset or a callable "
                      f"returning batches, got {type(data).__name__}")
        if isinstance(self.data, str) and not self.data:
            raise bad("data", "is an empty path; give a glob like 'calib/*.npy'")

    @property
    def explicit(self) -> bool:
        """Whether the algorithm names an explicit (Q/DQ) method rather than only a TensorRT calibrator."""
        return self.algorithm in EXPLICIT_METHODS

    def describe_data(self) -> str | None:
        data = self.data
        if data is None or isinstance(data, str):
            return data
        if callable(data):
            return f"callable {getattr(data, '__module__', '?')}.{getattr(data, '__qualname__', type(data).__name__)}"
        return f"{type(data).__name__} ({getattr(data, 'n', '?')} samples)"

    def data_sha256(self) -> str | None:
        """Digest of the calibration samples (computed once per Calibration; None without data)."""
        if self.data is None:
            return None
        if not self._digest:
            from pytest_trt.calibration.data import data_digest

            self._digest.append(data_digest(self))
        return self._digest[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "data": self.describe_data(),
            "data_sha256": self.data_sha256(),
            "cache": str(self.cache) if self.cache is not None else None,
            "cache_sha256": self.cache_sha256,
            "batch_size": self.batch_size,
            "num_batches": self.num_batches,
            "percentile": self.percentile,
            "per_channel": self.per_channel,
        }

    def canonical(self) -> dict[str, Any]:
        """:meth:`to_json` without the paths: the samples enter by digest, the cache by whether there is one."""
        data = self.to_json()
        data["data"] = None if isinstance(self.data, str) else data["data"]
        data["cache"] = self.cache is not None
        return data


@dataclass(frozen=True)
class OrtOptions:
    """ONNX Runtime session options, pinned like any TensorRT field.

    Only the ``onnxruntime`` backend honours these; a TensorRT backend given
    non-default ORT options refuses the config.
    """

    graph_optimization_level: str = "all"
    execution_providers: tuple[str, ...] = ("CPUExecutionProvider",)
    intra_op_threads: int = 1
    inter_op_threads: int = 1
    deterministic: bool = True

    LEVELS = ("disabled", "basic", "extended", "layout", "all")

    def __post_init__(self) -> None:
        if self.graph_optimization_level not in self.LEVELS:
            raise ConfigError(
                f"ort.graph_optimization_level {self.graph_optimization_level!r} is unknown; "
                f"choose one of {', '.join(self.LEVELS)}",
                field="ort",
            )
        providers = self.execution_providers
        if isinstance(providers, str):
            providers = (providers,)
        object.__setattr__(self, "execution_providers", tuple(providers))
        for name in ("intra_op_threads", "inter_op_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"ort.{name} must be a non-negative int, got {v!r}", field="ort")

    def to_json(self) -> dict[str, Any]:
        return {
            "graph_optimization_level": self.graph_optimization_level,
            "execution_providers": list(self.execution_providers),
            "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads,
            "deterministic": self.deterministic,
        }


def _from_table(kind: type[Any], table: Mapping[str, Any], label: str) -> Any:
    """``kind(**table)`` with unknown keys and wrong value types named (not a raw TypeError)."""
    known = {f.name for f in fields(kind) if f.init}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(unknown)} under {label}; known: {', '.join(sorted(known))}",
            field=f"{label}.{unknown[0]}",
        )
    try:
        return kind(**table)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{label}: {exc}", field=label) from None


def _calibration_from_mapping(data: Mapping[str, Any], base_dir: Path | None) -> Calibration:
    kwargs = dict(data)
    for key in ("data", "cache"):
        if isinstance(kwargs.get(key), str) and base_dir is not None:
            kwargs[key] = str(base_dir / kwargs[key])
    result: Calibration = _from_table(Calibration, kwargs, "calibration")
    return result


@dataclass(frozen=True)
class BuildConfig:
    """One pinned engine build.

    Every field that can change an engine is here and is applied, read back
    from the builder ("effective config") and recorded; a field a backend
    cannot honour is an error, never a silent no-op.
    """

    name: str
    onnx: Path
    version: str = "0"
    precision: str = "fp32"
    profiles: tuple[Profile, ...] = ()
    builder_optimization_level: int | None = None
    memory_pool_limits: Mapping[str, int] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    timing_cache: Path | None = None
    compute_capabilities: tuple[str, ...] = ()
    hardware_compatibility_level: str | None = None
    calibration: Calibration | None = None
    ort: OrtOptions | None = None
    #: Always DETAILED: the per-layer ONNX origins in the log are the audit evidence.
    profiling_verbosity: str = field(default="DETAILED", init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", self.name):
            raise ConfigError(
                f"BuildConfig.name {self.name!r} must be non-empty and use letters, digits, '_', '-', '.'",
                field="name",
            )
        set_(self, "version", str(self.version))
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*", self.version):
            raise ConfigError(f"BuildConfig.version {self.version!r} must look like '1.2.3'", field="version")
        onnx = Path(self.onnx)
        if not onnx.is_file():
            raise ConfigError(
                f"BuildConfig {self.name!r}: ONNX file {str(onnx)!r} does not exist "
                f"(relative paths resolve against {Path.cwd()})",
                field="onnx",
            )
        set_(self, "onnx", onnx)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"BuildConfig.precision {self.precision!r} is unknown; choose one of {', '.join(PRECISIONS)}",
                field="precision",
            )
        if isinstance(self.profiles, Profile):
            set_(self, "profiles", (self.profiles,))
        profiles = tuple(self.profiles)
        for p in profiles:
            if not isinstance(p, Profile):
                raise ConfigError(f"BuildConfig.profiles must hold Profile objects, got {p!r}", field="profiles")
        if profiles and len({p.names() for p in profiles}) != 1:
            raise ConfigError("BuildConfig.profiles: every profile must name the same inputs", field="profiles")
        set_(self, "profiles", profiles)
        level = self.builder_optimization_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5):
            raise ConfigError(
                f"BuildConfig.builder_optimization_level must be an int from 0 to 5, got {level!r}",
                field="builder_optimization_level",
            )
        pools: dict[str, int] = {}
        for key, raw in dict(self.memory_pool_limits).items():
            if key not in MEMORY_POOLS:
                raise ConfigError(
                    f"BuildConfig.memory_pool_limits: unknown pool {key!r}; choose from {', '.join(MEMORY_POOLS)}",
                    field="memory_pool_limits",
                )
            try:
                pools[key] = parse_size(raw)
            except ValueError as exc:
                raise ConfigError(
                    f"BuildConfig.memory_pool_limits[{key!r}]: {exc}", field="memory_pool_limits"
                ) from None
        set_(self, "memory_pool_limits", dict(sorted(pools.items())))
        flags = (self.flags,) if isinstance(self.flags, str) else tuple(self.flags)
        for f in flags:
            if not isinstance(f, str) or not _FLAG_NAME.match(f):
                raise ConfigError(
                    f"BuildConfig.flags: {f!r} is not a builder flag name (use names like 'STRICT_NANS', not integers)",
                    field="flags",
                )
        if "FP16" in flags or "INT8" in flags or "BF16" in flags or "FP8" in flags:
            raise ConfigError(
                "BuildConfig.flags: set precision with precision='fp16'/'int8'/..., not with precision flags",
                field="flags",
            )
        set_(self, "flags", tuple(sorted(set(flags))))
        if self.timing_cache is not None:
            set_(self, "timing_cache", Path(self.timing_cache))
        caps = (
            (self.compute_capabilities,)
            if isinstance(self.compute_capabilities, str)
            else tuple(self.compute_capabilities)
        )
        caps = tuple(c.upper() for c in caps)
        for c in caps:
            if not _COMPUTE_CAPABILITY.match(c):
                raise ConfigError(
                    f"BuildConfig.compute_capabilities: {c!r} is not like 'SM89' or 'SM120'",
                    field="compute_capabilities",
                )
        set_(self, "compute_capabilities", tuple(sorted(set(caps))))
        if self.calibration is not None and not isinstance(self.calibration, Calibration):
            raise ConfigError("BuildConfig.calibration must be a Calibration", field="calibration")
        if self.calibration is not None and self.precision != "int8":
            raise ConfigError("BuildConfig.calibration needs precision='int8'", field="calibration")
        if self.ort is not None and not isinstance(self.ort, OrtOptions):
            raise ConfigError("BuildConfig.ort must be an OrtOptions", field="ort")

    # -- serialisation -------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Every field as JSON (the ONNX path included); see :meth:`canonical_json`."""
        return {
            "schema": SCHEMA_VERSION,
            "name": self.name,
            "version": self.version,
            "onnx": str(self.onnx),
            "precision": self.precision,
            "profiles": [p.to_json() for p in self.profiles],
            "builder_optimization_level": self.builder_optimization_level,
            "memory_pool_limits": dict(self.memory_pool_limits),
            "flags": list(self.flags),
            "timing_cache": str(self.timing_cache) if self.timing_cache else None,
            "compute_capabilities": list(self.compute_capabilities),
            "hardware_compatibility_level": self.hardware_compatibility_level,
            "calibration": self.calibration.to_json() if self.calibration else None,
            "ort": self.ort.to_json() if self.ort else None,
            "profiling_verbosity": self.profiling_verbosity,
        }

    def canonical_json(self) -> str:
        """Sorted-key JSON of everything that can change the engine.

        The ONNX *path* and the timing-cache *path* are left out: the model is
        represented by its bytes (see :attr:`config_hash`), and a timing cache
        changes only which tactics are tried, which the build record shows.
        Moving a repository therefore does not invalidate its pins.
        """
        data = self.to_json()
        data.pop("onnx")
        data["timing_cache"] = self.timing_cache is not None
        if self.calibration is not None:
            data["calibration"] = self.calibration.canonical()
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @property
    def onnx_sha256(self) -> str:
        return sha256_file(self.onnx, memo=True)  # by path, size, mtime, ctime, inode (issue #14)

    @property
    def config_hash(self) -> str:
        return self.hash_with(self.onnx_sha256)

    def hash_with(self, onnx_sha256: str) -> str:
        """sha256 of the canonical JSON plus the ONNX file's sha256 (already computed)."""
        h = hashlib.sha256()
        h.update(self.canonical_json().encode())
        h.update(b"\0")
        h.update(onnx_sha256.encode())
        return h.hexdigest()

    # -- loading -------------------------------------------------------
    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, base_dir: Path | None = None) -> BuildConfig:
        """Build a config from plain data (TOML table, JSON); paths resolve against ``base_dir``."""
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(
                f"unknown BuildConfig field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}",
                field=sorted(unknown)[0],
            )
        kwargs = dict(data)
        if "name" not in kwargs or "onnx" not in kwargs:
            missing = "name" if "name" not in kwargs else "onnx"
            raise ConfigError(f"BuildConfig needs {missing!r}", field=missing)
        for key in ("onnx", "timing_cache"):
            if kwargs.get(key) is not None and base_dir is not None:
                kwargs[key] = base_dir / Path(kwargs[key])
        profiles = kwargs.get("profiles", [])
        if isinstance(profiles, Mapping):
            profiles = [profiles]
        if not isinstance(profiles, (list, tuple)) or not all(isinstance(p, Mapping) for p in profiles):
            raise ConfigError(
                f"profiles must be a table or a list of tables like {{input = [[1, 3, 224, 224], "
                f"[8, 3, 224, 224], [32, 3, 224, 224]]}}, got {profiles!r}",
                field="profiles",
            )
        kwargs["profiles"] = tuple(Profile(dict(p)) for p in profiles)
        if isinstance(kwargs.get("calibration"), Mapping):
            try:
                kwargs["calibration"] = _calibration_from_mapping(kwargs["calibration"], base_dir)
            except ConfigError as exc:
                raise ConfigError(f"BuildConfig {kwargs['name']!r}: {exc.message}", field=exc.field) from None
        if isinstance(kwargs.get("ort"), Mapping):
            ort = dict(kwargs["ort"])
            if isinstance(ort.get("execution_providers"), (list, tuple)):
                ort["execution_providers"] = tuple(ort["execution_providers"])
            kwargs["ort"] = _from_table(OrtOptions, ort, "ort")
        for key in ("flags", "compute_capabilities"):
            if key in kwargs:
                kwargs[key] = tuple(kwargs[key]) if not isinstance(kwargs[key], str) else (kwargs[key],)
        return cls(**kwargs)

    @classmethod
    def from_toml(cls, path: str | Path, name: str) -> BuildConfig:
        """Load the config ``name`` from a TOML pins file.

        The file holds ``[configs.<name>]`` tables (or top-level ``[<name>]``
        tables); relative paths resolve against the TOML file's folder.
        """
        if sys.version_info >= (3, 11):  # imported here: a pins file is rare, every session imports this module
            import tomllib
        else:  # pragma: no cover - exercised on 3.10 only
            import tomli as tomllib

        path = Path(path)
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist", field="name") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}", field="name") from None
        tables = doc.get("configs", doc)
        if name not in tables or not isinstance(tables[name], Mapping):
            available = sorted(k for k, v in tables.items() if isinstance(v, Mapping))
            raise ConfigError(
                f"config {name!r} is not in {str(path)!r}; it defines: {', '.join(available) or 'nothing'}",
                field="name",
            )
        data = dict(tables[name])
        data.setdefault("name", name)
        try:
            return cls.from_mapping(data, base_dir=path.parent)
        except ConfigError as exc:
            raise ConfigError(
                f"{path} [configs.{name}]: {exc.message}", field=exc.field, toml=str(path), config=name
            ) from None
        except (TypeError, ValueError) as exc:  # a value of the wrong type that no check above names
            raise ConfigError(
                f"{path} [configs.{name}]: {exc}; check the types of its values against BuildConfig",
                field="name", toml=str(path), config=name,
            ) from None

    def replace(self, **changes: Any) -> BuildConfig:
        """A copy with ``changes`` applied (and validated again)."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(changes)
        return BuildConfig(**kwargs)
