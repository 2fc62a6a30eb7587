"""The search's result as a TOML pin: the config's table as read, with ``exclude_nodes`` set, for review.

The written file holds one ``[configs.NAME]`` table (paths rebased onto the new file's folder) and its
``[configs.NAME.calibration]`` table with ``exclude_nodes``; comments above it give each step's metric.
``BuildConfig.from_toml(OUT, NAME)`` loads it; it is written atomically and read back before this returns.
A file pytest-trt did not write is never overwritten.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_trt.common.fileio import write_text_atomic
from pytest_trt.config import BuildConfig
from pytest_trt.errors import CommandInputError

MARK = "# written by pytest-trt calib search"
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
#: keys holding paths, relative to the TOML file's folder
_PATHS = {("onnx",), ("timing_cache",), ("calibration", "data"), ("calibration", "cache")}


def _load(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10 only
        import tomli as tomllib
    with open(path, "rb") as fh:
        doc: dict[str, Any] = tomllib.load(fh)
    return doc


def config_table(pins: Path, name: str) -> dict[str, Any]:
    """The ``[configs.NAME]`` (or top-level ``[NAME]``) table of ``pins`` as read (BuildConfig.from_toml's rule)."""
    tables = _load(pins)
    tables = tables.get("configs", tables)
    return dict(tables[name])


def key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def value(v: Any) -> str:
    """One TOML value (inline tables and arrays nest)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return ("inf" if v > 0 else "-inf") if math.isinf(v) else "nan" if math.isnan(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{key(str(k))} = {value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as TOML")


def _rebase(table: Mapping[str, Any], src: Path, dst: Path, prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, Mapping) and (*prefix, k) == ("calibration",):
            out[k] = _rebase(v, src, dst, (k,))
        elif (*prefix, k) in _PATHS and isinstance(v, str):
            out[k] = Path(os.path.relpath(src / v, dst)).as_posix()
        else:
            out[k] = v
    return out


def pin_text(table: Mapping[str, Any], name: str, exclude_nodes: Sequence[str], comments: Sequence[str]) -> str:
    """The TOML text of the pin."""
    lines = [MARK, *(f"# {c}" for c in comments), "", f"[configs.{key(name)}]"]
    calibration = dict(table.get("calibration") or {})
    for k, v in table.items():
        if k != "calibration":
            lines.append(f"{key(k)} = {value(v)}")
    calibration["exclude_nodes"] = list(exclude_nodes)
    lines += ["", f"[configs.{key(name)}.calibration]"]
    lines += [f"{key(k)} = {value(v)}" for k, v in calibration.items()]
    return "\n".join(lines) + "\n"


def write_pin(out: Path, pins: Path, name: str, exclude_nodes: Sequence[str], comments: Sequence[str]) -> BuildConfig:
    """Write the pin to ``out`` (atomically) and return it loaded by ``BuildConfig.from_toml``."""
    if out.is_dir():
        raise CommandInputError(f"--write-pin {out}: is a directory; give a file path like {out / 'pins.toml'}")
    if out.exists():
        try:
            head = out.read_text(encoding="utf-8").split("\n", 1)[0]
        except (OSError, UnicodeDecodeError):
            head = ""
        if head != MARK:
            raise CommandInputError(f"--write-pin {out}: the file exists and was not written by pytest-trt calib "
                                    "search; give a new path (then review and merge it into your pins)")
    table = _rebase(config_table(pins, name), pins.resolve().parent, out.resolve().parent)
    table.pop("name", None)
    text = pin_text({"name": name, **table}, name, exclude_nodes, comments)
    try:
        write_text_atomic(out, text)
    except OSError as exc:
        raise CommandInputError(f"--write-pin {out}: cannot be written ({exc.strerror}); choose a writable path") \
            from None
    return BuildConfig.from_toml(out, name)
