"""Pinned build configurations: :class:`BuildConfig`, :class:`Profile`, :class:`Calibration`.

A config is a pin: every field that can change an engine lives here, is
validated on construction, serialises to canonical JSON (sorted keys, flag
names rather than integers, which TensorRT 11 renumbered) and hashes to a
stable ``config_hash`` together with the ONNX file's bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_trt.errors import ConfigError
from pytest_trt.units import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

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
    """INT8 calibration settings (implicit calibration, TensorRT <= 10).

    ``algorithm`` names the calibrator (entropy2, minmax, ...); ``data`` is a
    glob of ``.npy`` batches; ``cache`` the calibration cache path.  The
    calibration issue gives this its behaviour; the foundation only validates
    and hashes it.
    """

    algorithm: str = "entropy2"
    data: str | None = None
    cache: str | None = None
    batch_size: int = 1

    def __post_init__(self) -> None:
        if self.algorithm not in CALIBRATION_ALGORITHMS:
            raise ConfigError(
                f"Calibration.algorithm {self.algorithm!r} is unknown; "
                f"choose one of {', '.join(CALIBRATION_ALGORITHMS)}",
                field="calibration",
            )
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(
                f"Calibration.batch_size must be a positive int, got {self.batch_size!r}", field="calibration"
            )

    def to_json(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "data": self.data, "cache": self.cache, "batch_size": self.batch_size}


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


#: sha256 of files already hashed, by (path, size, mtime, ctime, inode): a cache key and a golden
#: check each need the ONNX file's hash, and a 14 MB model took ~10 ms per hash (issue #14).
#: ctime changes on every write and cannot be set back by ``os.utime``, so an edited file is rehashed.
_SHA256_MEMO: dict[tuple[str, int, int, int, int], str] = {}


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    st = os.stat(path)
    memo_key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    known = _SHA256_MEMO.get(memo_key)
    if known is not None:
        return known
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    if len(_SHA256_MEMO) > 4096:  # a session hashes a few models; never grow without bound
        _SHA256_MEMO.clear()
    _SHA256_MEMO[memo_key] = digest = h.hexdigest()
    return digest


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
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @property
    def onnx_sha256(self) -> str:
        return sha256_file(self.onnx)

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
        kwargs["profiles"] = tuple(Profile(dict(p)) for p in profiles)
        if isinstance(kwargs.get("calibration"), Mapping):
            kwargs["calibration"] = Calibration(**kwargs["calibration"])
        if isinstance(kwargs.get("ort"), Mapping):
            ort = dict(kwargs["ort"])
            if "execution_providers" in ort:
                ort["execution_providers"] = tuple(ort["execution_providers"])
            kwargs["ort"] = OrtOptions(**ort)
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
        return cls.from_mapping(data, base_dir=path.parent)

    def replace(self, **changes: Any) -> BuildConfig:
        """A copy with ``changes`` applied (and validated again)."""
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(changes)
        return BuildConfig(**kwargs)
