"""Compare two verified bundles: config, environment, build metadata and build record.

The question this answers is "why do these two engines differ?" (two data
centers, two toolchain versions): differences in what was asked (config),
where it was built and run (environment, versions, device), and what the
builder did (fusions, per-layer precision, tactic and format, memory and
layer counts, new warnings: :func:`pytest_trt.buildlog.record_diff.diff_records`).

Left out on purpose: build durations and per-message log times (they differ
on every build; shown as information only), the ONNX *path* (the model is
compared by its sha256), and the order of ``pip freeze``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.audit.verify import VerifiedBundle

_IGNORED_CONFIG = frozenset({"pinned.onnx"})
_BUILD_FIELDS = (
    "backend", "config_hash", "onnx_sha256", "engine_sha256", "engine_bytes", "versions", "device", "extra",
)
_MAX_LINES = 40


@dataclass(frozen=True)
class Change:
    """One differing leaf: dotted path, old value, new value (``None`` when absent)."""

    path: str
    old: Any
    new: Any

    def render(self) -> str:
        return f"{self.path}: {_short(self.old)} -> {_short(self.new)}"


def _short(value: Any) -> str:
    if isinstance(value, float):  # rounded for display only; to_dict keeps every digit
        return f"{value:.6g}"
    text = "absent" if value is None else json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaves of nested dicts and lists as ``(dotted.path, value)``; list items by index."""
    if isinstance(data, Mapping) and data:
        for key in sorted(data):
            yield from flatten(data[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list) and data:
        for i, item in enumerate(data):
            yield from flatten(item, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, data


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (Mapping, list)) and not value)


def changes(old: Any, new: Any, *, ignore: frozenset[str] = frozenset()) -> tuple[Change, ...]:
    """Differing leaves; an empty object or array on one side whose keys the other side lists is not a change of
    its own (``env: {}`` against ``env.OMP_NUM_THREADS``: one difference, the variable)."""
    a, b = dict(flatten(old)), dict(flatten(new))
    parents = {path[:i] for path in (*a, *b) for i, ch in enumerate(path) if ch == "."}
    parents |= {""} if any(a) or any(b) else set()  # the top level holds every other path
    return tuple(
        Change(path, a.get(path), b.get(path))
        for path in sorted(set(a) | set(b))
        if path not in ignore and a.get(path) != b.get(path)
        and not (path in parents and _empty(a.get(path)) and _empty(b.get(path)))
    )


def _freeze(env: Mapping[str, Any]) -> dict[str, str]:
    return dict(line.split("==", 1) for line in env.get("pip_freeze") or () if "==" in line)


@dataclass(frozen=True)
class BundleDiff:
    old: str
    new: str
    config: tuple[Change, ...]
    build: tuple[Change, ...]
    environment: tuple[Change, ...]
    packages: tuple[Change, ...]
    record: Any = None  # a RecordDiff, or None when a record is missing
    notes: tuple[str, ...] = ()
    golden: tuple[Change, ...] = ()  # golden verdict per test id, old -> new (pytest_trt.upgrade)
    durations: dict[str, Any] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        record_empty = self.record is None or bool(self.record.is_empty)
        return not (self.config or self.build or self.environment or self.packages or self.golden) and record_empty

    def to_dict(self) -> dict[str, Any]:
        def rows(cs: tuple[Change, ...]) -> list[dict[str, Any]]:
            return [{"path": c.path, "old": c.old, "new": c.new} for c in cs]

        return {
            "old": self.old,
            "new": self.new,
            "identical": self.is_empty,
            "config": rows(self.config),
            "build": rows(self.build),
            "environment": rows(self.environment),
            "packages": rows(self.packages),
            "golden": rows(self.golden),
            "record": self.record.to_dict() if self.record is not None else None,
            "durations": self.durations,
            "notes": list(self.notes),
        }

    def render(self, *, max_lines: int = _MAX_LINES) -> str:
        out = [f"--- {self.old}", f"+++ {self.new}"]
        for title, cs in (
            ("config", self.config),
            ("build", self.build),
            ("environment", self.environment),
            ("packages", self.packages),
            ("golden verdicts", self.golden),
        ):
            if cs:
                out.append(f"{title}: {len(cs)} difference{'s' if len(cs) != 1 else ''}")
                out += [f"  {c.render()}" for c in cs[:max_lines]]
                if len(cs) > max_lines:
                    out.append(f"  ... {len(cs) - max_lines} more (use --json for all)")
        if self.record is not None and not self.record.is_empty:
            out.append("record:")
            out += [f"  {line}" for line in self.record.render().splitlines()]
        out += [f"note: {n}" for n in self.notes]
        if self.durations:
            out.append("build seconds (information only): " + ", ".join(
                f"{k} {_short(v[0])} -> {_short(v[1])}" for k, v in sorted(self.durations.items())))
        if self.is_empty:
            out.append("no differences")
        return "\n".join(out)


def diff_bundles(old: VerifiedBundle, new: VerifiedBundle, *, mask_tactics: bool = False) -> BundleDiff:
    """Differences from ``old`` to ``new``; tactics are compared unless ``mask_tactics``."""
    notes: list[str] = []
    build_a, build_b = old.build["build"], new.build["build"]
    env_a = {k: v for k, v in old.environment.items() if k != "pip_freeze"}
    env_b = {k: v for k, v in new.environment.items() if k != "pip_freeze"}
    record = None
    rec_a, rec_b = old.record(), new.record()
    if rec_a is None or rec_b is None:
        notes.append("a bundle has no build record; layers were not compared")
    else:
        try:
            from pytest_trt.buildlog.record_diff import diff_records
        except ImportError:
            notes.append("record diff unavailable: pytest_trt.buildlog.record_diff is not installed")
        else:
            record = diff_records(rec_a, rec_b, mask_tactics=mask_tactics)
    # the verifier checked the types; optional keys may be absent or null
    dur_a, dur_b = build_a.get("durations") or {}, build_b.get("durations") or {}
    durations = {k: [dur_a.get(k), dur_b.get(k)] for k in sorted(set(dur_a) | set(dur_b))}
    return BundleDiff(
        old=str(old.path),
        new=str(new.path),
        config=changes(old.config, new.config, ignore=_IGNORED_CONFIG),
        build=changes({k: build_a.get(k) for k in _BUILD_FIELDS}, {k: build_b.get(k) for k in _BUILD_FIELDS}),
        environment=changes(env_a, env_b),
        packages=changes(_freeze(old.environment), _freeze(new.environment)),
        record=record,
        notes=tuple(notes),
        durations=durations,
        golden=changes(_verdicts(old.golden), _verdicts(new.golden)),
    )


def _verdicts(golden: Mapping[str, Any] | None) -> dict[str, Any]:
    """test id -> verdict; the stored figures are compared by ``pytest-trt upgrade-report``, not here."""
    return {test: v.get("verdict") for test, v in (golden or {}).items()}
