"""Version pins: a reviewed TOML file stating which toolchain and hardware a session may use.

::

    # trt-pins.toml
    policy = "fail"                 # or "warn"
    backend = "tensorrt-rtx"        # allowed backend name(s)
    backend_version = ["1.7.*"]     # globs (fnmatch); a string or a list
    cuda_version = "none"           # "none" matches "not present" (CPU-only machines)
    driver_version = ["570.*", "none"]
    device = ["NVIDIA H200", "cpu"] # GPU names; "cpu" or the CPU model when there is no GPU
    python = "3.11.*"
    [packages]                      # any installed distribution, by name
    onnx = "1.1*"

An unreviewed toolchain upgrade then fails the session start with the full
list of differences instead of silently producing new engines.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_trt.errors import PinsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

POLICIES = ("fail", "warn")
#: pin key -> (description, how to read the captured value from environment.json)
_FIELDS = ("backend", "backend_version", "cuda_version", "driver_version", "device", "python")
NONE = "none"


def _globs(path: Path, key: str, value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(v, str) for v in items):
        raise PinsError(f"{path}: {key} must be a string or a non-empty list of strings, got {value!r}")
    return tuple(items)


@dataclass(frozen=True)
class Pins:
    """Allowed values per field; an empty tuple means "not pinned"."""

    path: Path
    policy: str = "fail"
    backend: tuple[str, ...] = ()
    backend_version: tuple[str, ...] = ()
    cuda_version: tuple[str, ...] = ()
    driver_version: tuple[str, ...] = ()
    device: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Pins:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise PinsError(f"cannot read pins file {str(path)!r}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise PinsError(f"{path}: not valid TOML ({exc})") from None
        except UnicodeDecodeError as exc:
            raise PinsError(f"{path}: not TOML: not UTF-8 text ({exc.reason} at byte {exc.start}); give the pins "
                            "file itself") from None
        unknown = set(data) - set(_FIELDS) - {"policy", "packages"}
        if unknown:
            raise PinsError(
                f"{path}: unknown key(s) {', '.join(sorted(unknown))}; known: policy, packages, {', '.join(_FIELDS)}"
            )
        policy = data.get("policy", "fail")
        if policy not in POLICIES:
            raise PinsError(f"{path}: policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        packages = data.get("packages", {})
        if not isinstance(packages, dict):
            raise PinsError(f"{path}: [packages] must be a table of name = version glob(s)")
        return cls(
            path=path,
            policy=policy,
            packages={name: _globs(path, f"packages.{name}", v) for name, v in sorted(packages.items())},
            **{key: _globs(path, key, data[key]) for key in _FIELDS if key in data},
        )


def _matches(found: str | None, globs: tuple[str, ...]) -> bool:
    if found is None:
        return NONE in globs
    return any(fnmatch.fnmatchcase(found, g) for g in globs)


def _freeze_version(env: Mapping[str, Any], name: str) -> str | None:
    wanted = name.lower().replace("_", "-")
    for line in env.get("pip_freeze", ()):
        dist, _, version = line.partition("==")
        if dist == wanted:
            return str(version)
    return None


def check_pins(pins: Pins, env: Mapping[str, Any]) -> list[str]:
    """Every difference between ``pins`` and a captured environment, one line each."""
    backend = env.get("backend") or {}
    cuda = env.get("cuda") or {}
    found: dict[str, list[str | None]] = {
        "backend": [backend.get("name")],
        "backend_version": [backend.get("version")],
        "cuda_version": [cuda.get("runtime")],
        "driver_version": [cuda.get("driver")],
        "python": [(env.get("python") or {}).get("version")],
    }
    problems = []
    for key in _FIELDS:
        globs: tuple[str, ...] = getattr(pins, key)
        if not globs:
            continue
        if key == "device":
            gpus = [g.get("name") for g in env.get("gpus") or ()]
            if gpus:
                bad = [g for g in gpus if not _matches(g, globs)]
                if bad:
                    problems.append(f"device: found {', '.join(map(str, bad))}, pinned {' | '.join(globs)}")
            elif not (_matches("cpu", globs) or _matches((env.get("cpu") or {}).get("model"), globs)):
                model = (env.get("cpu") or {}).get("model")
                problems.append(f"device: found cpu ({model}), no GPU; pinned {' | '.join(globs)}")
            continue
        for value in found[key]:
            if not _matches(value, globs):
                problems.append(f"{key}: found {value or NONE}, pinned {' | '.join(globs)}")
    for name, globs in pins.packages.items():
        value = _freeze_version(env, name)
        if not _matches(value, globs):
            problems.append(f"packages.{name}: found {value or NONE}, pinned {' | '.join(globs)}")
    return problems
