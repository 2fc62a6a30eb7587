"""Pinned build configurations: :class:`BuildConfig` and the ONNX Runtime options it may hold, :class:`OrtOptions`.

A config is a pin: every field that can change an engine lives here, is
validated on construction, serialises to canonical JSON (sorted keys, flag
names rather than integers, which TensorRT 11 renumbered) and hashes to a
stable ``config_hash`` together with the ONNX file's bytes and, for a
calibrated config, the calibration data's digest (computed by
:mod:`pytest_trt.common.calibration_data` and handed in).  Its parts are
:class:`~pytest_trt.common.profile.Profile` and
:class:`~pytest_trt.common.calibration.Calibration`, re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pytest_trt.common import relpaths
from pytest_trt.common.calibration import CALIBRATION_ALGORITHMS, EXPLICIT_METHODS, IMPLICIT_CALIBRATORS, Calibration
from pytest_trt.common.filehash import sha256_file
from pytest_trt.common.pin_fields import (
    MEMORY_POOLS,
    builder_flags_of,
    compute_capabilities_of,
    memory_pools_of,
    profiles_of,
)
from pytest_trt.common.profile import InputRange, Profile, Shape
from pytest_trt.errors import ConfigError

__all__ = [
    "CALIBRATION_ALGORITHMS", "EXPLICIT_METHODS", "IMPLICIT_CALIBRATORS", "MEMORY_POOLS", "PRECISIONS",
    "SCHEMA_VERSION", "BuildConfig", "Calibration", "InputRange", "OrtOptions", "Profile", "Shape",
]

#: Precisions a config may ask for.  ``typed`` means "take every precision from
#: the ONNX model's types" (strongly typed networks: TensorRT-RTX, TensorRT 11).
#: ``fp32`` means strict FP32: the TF32 flag TensorRT sets by default is cleared.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "best", "typed")

SCHEMA_VERSION = 1
#: longest config name and version: a bundle's file name holds both, with the backend, device and a temporary
#: suffix, within the 255 bytes a file name may have
MAX_NAME, MAX_VERSION = 100, 32


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
    #: the error of an ONNX file missing while pytest imported the test module (raised by :meth:`check_files`)
    _missing_onnx: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", self.name):
            raise ConfigError(
                f"BuildConfig.name {self.name!r} must be non-empty and use letters, digits, '_', '-', '.'",
                field="name",
            )
        if len(self.name) > MAX_NAME:
            raise ConfigError(f"BuildConfig.name {self.name[:24]!r}... is {len(self.name)} characters long; give at "
                              f"most {MAX_NAME} (file names hold it: bundles, goldens, cache folders)", field="name")
        set_(self, "version", str(self.version))
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*", self.version):
            raise ConfigError(f"BuildConfig.version {self.version!r} must look like '1.2.3'", field="version")
        if len(self.version) > MAX_VERSION:
            raise ConfigError(f"BuildConfig {self.name!r}: version {self.version[:24]!r}... is {len(self.version)} "
                              f"characters long; give at most {MAX_VERSION}", field="version")
        onnx = relpaths.resolve(self.onnx)
        if not onnx.is_file():
            message = (f"BuildConfig {self.name!r}: ONNX file {str(self.onnx)!r} does not exist; "
                       f"{relpaths.describe_rule()}")
            if not relpaths.is_deferring():
                raise ConfigError(message, field="onnx")
            set_(self, "_missing_onnx", message)  # the tests of this config fail with it; the module's others run
        set_(self, "onnx", onnx)
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"BuildConfig.precision {self.precision!r} is unknown; choose one of {', '.join(PRECISIONS)}",
                field="precision",
            )
        set_(self, "profiles", profiles_of(self.profiles))
        level = self.builder_optimization_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5):
            raise ConfigError(
                f"BuildConfig.builder_optimization_level must be an int from 0 to 5, got {level!r}",
                field="builder_optimization_level",
            )
        set_(self, "memory_pool_limits", memory_pools_of(self.memory_pool_limits))
        set_(self, "flags", builder_flags_of(self.flags))
        if self.timing_cache is not None:
            set_(self, "timing_cache", relpaths.resolve(self.timing_cache))
        set_(self, "compute_capabilities", compute_capabilities_of(self.compute_capabilities))
        if self.calibration is not None and not isinstance(self.calibration, Calibration):
            raise ConfigError("BuildConfig.calibration must be a Calibration", field="calibration")
        if self.calibration is not None and self.precision != "int8":
            raise ConfigError("BuildConfig.calibration needs precision='int8'", field="calibration")
        if self.ort is not None and not isinstance(self.ort, OrtOptions):
            raise ConfigError("BuildConfig.ort must be an OrtOptions", field="ort")

    # -- serialisation -------------------------------------------------
    def to_json(self, data_sha256: str | None = None) -> dict[str, Any]:
        """Every field as JSON (the ONNX path included); see :meth:`canonical_json`.

        ``data_sha256``: the calibration data's digest (:func:`pytest_trt.common.calibration_data.data_digest`).
        """
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
            "calibration": self.calibration.to_json(data_sha256) if self.calibration else None,
            "ort": self.ort.to_json() if self.ort else None,
            "profiling_verbosity": self.profiling_verbosity,
        }

    def canonical_json(self, data_sha256: str | None = None) -> str:
        """Sorted-key JSON of everything that can change the engine.

        The ONNX *path* and the timing-cache *path* are left out: the model is
        represented by its bytes (see :attr:`config_hash`), and a timing cache
        changes only which tactics are tried, which the build record shows.
        Moving a repository therefore does not invalidate its pins.  The calibration
        data enter by ``data_sha256``, their digest.
        """
        data = self.to_json(data_sha256)
        data.pop("onnx")
        data["timing_cache"] = self.timing_cache is not None
        if self.calibration is not None:
            data["calibration"] = self.calibration.canonical(data_sha256)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def check_files(self) -> None:
        """Raise the ConfigError of an ONNX file that was missing while pytest imported the test module."""
        if self._missing_onnx is not None and not self.onnx.is_file():
            raise ConfigError(self._missing_onnx, field="onnx")

    @property
    def onnx_sha256(self) -> str:
        self.check_files()
        return sha256_file(self.onnx, memo=True, stamped=True)  # memoised by path, size, mtime, ctime, inode

    @property
    def data_sha256(self) -> str | None:
        """The calibration data's digest, computed now (a build request computes it once and carries it)."""
        if self.calibration is None or self.calibration.data is None:
            return None
        from pytest_trt.common.calibration_data import (
            data_digest,  # numpy and the samples, only for a calibrated config
        )

        return data_digest(self.calibration, config_name=self.name)

    @property
    def config_hash(self) -> str:
        return self.hash_with(self.onnx_sha256, self.data_sha256)

    def hash_with(self, onnx_sha256: str, data_sha256: str | None = None) -> str:
        """sha256 of the canonical JSON plus the ONNX file's sha256, both digests already computed."""
        h = hashlib.sha256()
        h.update(self.canonical_json(data_sha256).encode())
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

        path = relpaths.resolve(path)
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist; {relpaths.describe_rule()}",
                              field="name") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}", field="name") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not TOML: not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start}); give the pins file itself", field="name") from None
        except OSError as exc:
            raise ConfigError(f"config file {str(path)!r} cannot be read ({exc.strerror})", field="name") from None
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
