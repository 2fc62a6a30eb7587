"""Type checks of a bundle's JSON members, so readers never meet a wrong-typed value.

Hash and signature checks prove a bundle was not changed after it was
written, not that its writer was pytest-trt: anyone can edit an unsigned
bundle and recompute its manifest.  Everything ``bundle show``, ``bundle
diff`` and the recorder read is therefore checked here first, and a bundle
that fails gets one :class:`SchemaError` naming the member and the JSON path.

The build record is checked against the type hints of
:class:`~pytest_trt.buildlog.record.BuildRecord` and the dataclasses it holds,
so a field added there is checked without a change here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from pytest_trt.errors import SchemaError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _expect(value: Any, where: str, *types_: type, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    ok = isinstance(value, types_) and not (isinstance(value, bool) and bool not in types_)
    if not ok:
        names = [_kind(t()) if t is not type(None) else "null" for t in types_]
        if "a number" in names and "an integer" in names:  # int or float: a JSON number
            names.remove("an integer")
        wanted = " or ".join(names)
        raise SchemaError(where, f"expected {wanted}{' or null' if nullable else ''}, found {_kind(value)}")


def _at(where: str, key: object) -> str:
    """``build.json:`` + ``record`` -> ``build.json:record``; then ``.memory`` -> ``build.json:record.memory``."""
    return f"{where}{key}" if where.endswith(":") else f"{where}.{key}"


def _fields(doc: Mapping[str, Any], where: str, spec: Mapping[str, tuple[tuple[type, ...], bool, bool]]) -> None:
    """``spec``: key -> (types, nullable, required)."""
    for key, (types_, nullable, required) in spec.items():
        if key not in doc:
            if required:
                raise SchemaError(_at(where, key), "required key is missing")
            continue
        _expect(doc[key], _at(where, key), *types_, nullable=nullable)


def _sha(value: Any, where: str, *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    _expect(value, where, str)
    if not _SHA256.match(value):
        raise SchemaError(where, f"expected 64 lower-case hex digits, found {value[:80]!r}")


_NUM = (int, float)
_BUILD = {
    "bundle_schema": ((int,), False, True),
    "engine_included": ((bool,), False, False),
    "build": ((dict,), False, True),
    "record": ((dict,), True, False),
}
_BUILD_META = {
    "backend": ((str,), True, False),
    "config_hash": ((str,), False, True),
    "engine_bytes": ((int,), True, False),
    "durations": ((dict,), True, False),
    "versions": ((dict,), True, False),
    "device": ((dict,), True, False),
    "extra": ((dict,), True, False),
    "log_index": ((list,), True, False),
}
_CONFIG = {
    "pinned": ((dict,), False, True),
    "effective": ((dict,), True, False),
    "config_hash": ((str,), False, True),
    "onnx_sha256": ((str,), True, False),
}
_ENVIRONMENT = {
    "schema": ((int,), False, False),
    "backend": ((dict,), True, False),
    "packages": ((dict,), True, False),
    "python": ((dict,), True, False),
    "cuda": ((dict,), True, False),
    "gpus": ((list,), True, False),
    "cpu": ((dict,), True, False),
    "os": ((dict,), True, False),
    "git": ((dict,), True, False),
    "env": ((dict,), True, False),
    "pip_freeze": ((list,), True, False),
    "hostname": ((str,), True, False),
}


def check_build(doc: Mapping[str, Any]) -> None:
    _fields(doc, "build.json:", _BUILD)
    meta = doc["build"]
    _fields(meta, "build.json:build", _BUILD_META)
    _sha(meta.get("engine_sha256"), "build.json:build.engine_sha256")
    for key, value in (meta.get("durations") or {}).items():
        _expect(value, f"build.json:build.durations.{key}", *_NUM, nullable=True)
    if doc.get("record") is not None:
        check_record(doc["record"])


def check_config(doc: Mapping[str, Any]) -> None:
    _fields(doc, "config.json:", _CONFIG)


def check_environment(doc: Mapping[str, Any]) -> None:
    _fields(doc, "environment.json:", _ENVIRONMENT)
    for i, line in enumerate(doc.get("pip_freeze") or ()):
        _expect(line, f"environment.json:pip_freeze.{i}", str)
    for i, gpu in enumerate(doc.get("gpus") or ()):
        _expect(gpu, f"environment.json:gpus.{i}", dict)


def check_calibration(doc: Mapping[str, Any]) -> None:
    _sha(doc.get("cache_sha256"), "calibration.json:cache_sha256", nullable=True)
    _sha(doc.get("qdq_model_sha256"), "calibration.json:qdq_model_sha256", nullable=True)


_STR_OR_NULL = ((str,), True, False)
_NUM_OR_NULL = (_NUM, True, False)
#: one golden check (``pytest_trt.pytest_plugin.record.GoldenVerdict``): read by ``bundle show``/``diff``, the
#: catalog, the recorder's merge and the upgrade report
_VERDICT = {
    "verdict": ((str,), False, True),
    "config_hash": _STR_OR_NULL,
    "message": _STR_OR_NULL,
    "test": _STR_OR_NULL,
    "golden": _STR_OR_NULL,
    "generation": ((int,), True, False),
    "dataset_sha256": _STR_OR_NULL,
    "detail": ((dict,), True, False),
    "outputs": ((dict,), True, False),
}
_DETAIL = {"checks": ((list,), True, False), "passed": ((bool,), True, False)}
_METRIC_CHECK = {
    "output": _STR_OR_NULL, "metric": _STR_OR_NULL, "status": _STR_OR_NULL, "text": _STR_OR_NULL,
    "stat": _STR_OR_NULL, "tag": _STR_OR_NULL, "reason": _STR_OR_NULL,
    "value": _NUM_OR_NULL, "threshold": _NUM_OR_NULL,
}
_SUMMARY = {"schema": ((int,), True, False), "golden_file": _STR_OR_NULL, "outputs": ((dict,), True, False)}
_OUTPUT = {
    "metrics": ((dict,), True, False),
    "thresholds": ((dict,), True, False),
    "classes": ((int,), True, False),
    "histograms": ((dict,), True, False),
    "confusion": ((list,), True, False),
}
#: keys of an output's ``metrics`` that hold objects; every other value there is a number or null
_NESTED_METRICS = ("tags", "drift")
_HISTOGRAM = {"range": ((list,), False, True), "counts": ((list,), False, True)}


def _numbers(doc: Mapping[str, Any], where: str, *, switches: str | None = None) -> None:
    """Every value a number or null; with ``switches``, keys starting with it may hold a boolean."""
    for key, value in doc.items():
        switch = switches is not None and str(key).startswith(switches)
        _expect(value, _at(where, key), *_NUM, *((bool,) if switch else ()), nullable=True)


def _objects_of_numbers(doc: Mapping[str, Any], where: str) -> None:
    for key, value in doc.items():
        _expect(value, _at(where, key), dict)
        _numbers(value, _at(where, key))


def _check_histogram(doc: Any, where: str) -> None:
    _expect(doc, where, dict)
    _fields(doc, where, _HISTOGRAM)
    span = doc["range"]
    if len(span) != 2:
        raise SchemaError(_at(where, "range"), f"expected 2 items, found {len(span)}")
    for i, bound in enumerate(span):
        _expect(bound, _at(where, f"range.{i}"), *_NUM)
    for i, count in enumerate(doc["counts"]):
        _expect(count, _at(where, f"counts.{i}"), int)


def _check_output(doc: Any, where: str) -> None:
    _expect(doc, where, dict)
    _fields(doc, where, _OUTPUT)
    metrics = doc.get("metrics") or {}
    _numbers({k: v for k, v in metrics.items() if k not in _NESTED_METRICS}, _at(where, "metrics"))
    for key in _NESTED_METRICS:
        if key in metrics:
            _expect(metrics[key], _at(where, f"metrics.{key}"), dict)
            _objects_of_numbers(metrics[key], _at(where, f"metrics.{key}"))
    _numbers(doc.get("thresholds") or {}, _at(where, "thresholds"), switches="allow_")  # Thresholds' fields
    for stat, histogram in (doc.get("histograms") or {}).items():
        _check_histogram(histogram, _at(where, f"histograms.{stat}"))
    for i, cell in enumerate(doc.get("confusion") or ()):
        _expect(cell, _at(where, f"confusion.{i}"), list)
        if len(cell) != 3:
            raise SchemaError(_at(where, f"confusion.{i}"), f"expected 3 items (label, predicted, count), "
                              f"found {len(cell)}")
        for j, number in enumerate(cell):
            _expect(number, _at(where, f"confusion.{i}.{j}"), int)


def check_golden(doc: Mapping[str, Any]) -> None:
    _fields(doc, "golden.json:", {"schema": ((int,), False, True), "checks": ((dict,), False, True)})
    for test, verdict in doc["checks"].items():
        where = f"golden.json:checks.{test}"
        _expect(verdict, where, dict)
        _fields(verdict, where, _VERDICT)
        detail = verdict.get("detail") or {}
        _fields(detail, _at(where, "detail"), _DETAIL)
        for i, check in enumerate(detail.get("checks") or ()):
            _expect(check, _at(where, f"detail.checks.{i}"), dict)
            _fields(check, _at(where, f"detail.checks.{i}"), _METRIC_CHECK)
        summary = verdict.get("outputs") or {}
        _fields(summary, _at(where, "outputs"), _SUMMARY)
        for output, figures in (summary.get("outputs") or {}).items():
            _check_output(figures, _at(where, f"outputs.outputs.{output}"))


# -- the build record, checked against the dataclasses' type hints ---------------------------------


def check_record(doc: Any, where: str = "build.json:record") -> None:
    """Raise :class:`SchemaError` unless ``doc`` is a BuildRecord dict every reader can use as typed."""
    from pytest_trt.buildlog.record import BuildRecord

    _check_value(doc, BuildRecord, where)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@functools.cache
def _fields_of(cls: type) -> tuple[tuple[str, bool, Any], ...]:
    """(name, required, type hint) of each field of the dataclass ``cls``."""
    hints = _hints(cls)
    return tuple((f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                  hints[f.name]) for f in dataclasses.fields(cls))


@functools.cache
def _shape(hint: Any) -> tuple[bool, Any, tuple[Any, ...]]:
    """(whether ``hint`` is a dataclass, its origin, its arguments), worked out once per hint."""
    return dataclasses.is_dataclass(hint) and isinstance(hint, type), typing.get_origin(hint), typing.get_args(hint)


def _check_dataclass(doc: Any, cls: type, where: str) -> None:
    _expect(doc, where, dict)
    for name, required, hint in _fields_of(cls):
        if name not in doc:
            if required:
                raise SchemaError(_at(where, name), "required key is missing")
            continue
        _check_value(doc[name], hint, _at(where, name))


def _check_value(value: Any, hint: Any, where: str) -> None:
    is_dataclass, origin, args = _shape(hint)
    if is_dataclass:
        _check_dataclass(value, hint, where)
        return
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        rest = [a for a in args if a is not type(None)]
        errors = []
        for arg in rest:
            try:
                _check_value(value, arg, where)
                return
            except SchemaError as exc:
                errors.append(exc)
        raise errors[0]
    if origin is typing.Literal:
        if value not in args:
            raise SchemaError(where, f"expected one of {list(args)}, found {json.dumps(value)[:40]}")
        return
    if origin is list:
        _expect(value, where, list)
        for i, item in enumerate(value):
            _check_value(item, args[0] if args else Any, f"{where}.{i}")
        return
    if origin is tuple:
        _expect(value, where, list)
        if len(args) == 2 and args[1] is Ellipsis:
            for i, item in enumerate(value):
                _check_value(item, args[0], f"{where}.{i}")
            return
        if len(value) != len(args):
            raise SchemaError(where, f"expected {len(args)} items, found {len(value)}")
        for i, (item, arg) in enumerate(zip(value, args, strict=True)):
            _check_value(item, arg, f"{where}.{i}")
        return
    if origin is dict:
        _expect(value, where, dict)
        for key, item in value.items():
            _check_value(item, args[1], f"{where}.{key}")
        return
    if hint is Any:
        return
    if hint is float:
        _expect(value, where, int, float)
        return
    if hint in (str, int, bool):
        _expect(value, where, hint)
        return
    # a kind of field this function does not know yet (a record field added later): left unchecked rather than
    # failing every bundle; extend this function when adding one
