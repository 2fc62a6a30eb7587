"""What changed in a config's pin between OLD and NEW: config hash, BuildConfig fields, calibration, ranges.

The reviewer's first question about a changed engine is whether it was asked for: a different
BuildConfig (precision, profiles, calibration algorithm, data) is a different pin, whatever the
toolchain did.  Path fields are shown by their digest (``onnx`` by ``onnx_sha256``, the calibration
data by ``data_sha256``): a model moved to another folder is the same model.  Per-tensor INT8 ranges
are compared by their amax (``max(|lo|, |hi|)``, what TensorRT's scale is made of), the largest
relative move first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_trt.audit.bundle_diff import changes
from pytest_trt.upgrade.pairing import Side

#: pinned path fields, shown by the digest field beside them instead
_PATH_FIELDS = frozenset({"onnx", "calibration.data", "calibration.cache"})
#: recorded calibration facts (build.json ``extra.calibration``) a reviewer reads, in this order
CALIBRATION_FACTS = ("algorithm", "quantizer", "cache_header", "data_sha256", "cache_sha256", "qdq_model_sha256",
                     "exclude_nodes", "samples")

#: prefix of the calibration facts the build recorded (build.json), beside the pinned fields
RECORDED = "calibration (recorded)"

Range = tuple[float, float]


def amax(r: Range) -> float:
    return max(abs(float(r[0])), abs(float(r[1])))


@dataclass(frozen=True)
class RangeChange:
    tensor: str
    old: Range
    new: Range

    @property
    def ratio(self) -> float:
        """NEW amax / OLD amax (inf when OLD's is 0 and NEW's is not)."""
        a, b = amax(self.old), amax(self.new)
        return b / a if a else math.inf

    @property
    def size(self) -> float:
        """|log(new amax / old amax)|: how far the scale moved, either way (inf from or to 0)."""
        a, b = amax(self.old), amax(self.new)
        if a == b:
            return 0.0
        return abs(math.log(b / a)) if a and b else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "old": list(self.old), "new": list(self.new), "old_amax": amax(self.old),
                "new_amax": amax(self.new), "ratio": self.ratio}


@dataclass(frozen=True)
class PinChange:
    config_hash: tuple[str | None, str | None]
    fields: tuple[tuple[str, Any, Any], ...] = ()  # (dotted field, old, new)
    ranges: tuple[RangeChange, ...] = ()  # moved ranges, largest move first
    ranges_added: tuple[str, ...] = ()
    ranges_removed: tuple[str, ...] = ()
    ranges_unchanged: int = 0

    @property
    def changed(self) -> bool:
        return self.config_hash[0] != self.config_hash[1] or bool(self.fields or self.ranges or self.ranges_added
                                                                  or self.ranges_removed)

    def to_dict(self) -> dict[str, Any]:
        return {"config_hash": {"old": self.config_hash[0], "new": self.config_hash[1]}, "changed": self.changed,
                "fields": [{"field": k, "old": a, "new": b} for k, a, b in self.fields],
                "ranges": [r.to_dict() for r in self.ranges], "ranges_added": list(self.ranges_added),
                "ranges_removed": list(self.ranges_removed), "ranges_unchanged": self.ranges_unchanged}

    def line(self, limit: int = 2) -> str:
        """The terminal's one line: ``pin: config hash a -> b; calibration.algorithm entropy -> minmax; ...``."""
        if not self.changed:
            return f"pin: unchanged (config hash {(self.config_hash[0] or '?')[:8]})"
        bits = [f"config hash {(self.config_hash[0] or '?')[:8]} -> {(self.config_hash[1] or '?')[:8]}"]
        # the pinned fields (what was asked for); what the calibration recorded is counted (HTML and JSON list it)
        pinned = [f for f in self.fields if not f[0].startswith(RECORDED)]
        bits += [f"{k} {_short(a)} -> {_short(b)}" for k, a, b in pinned[:limit]]
        more = len(pinned) - len(pinned[:limit])
        recorded = len(self.fields) - len(pinned)
        if more or recorded:
            bits.append(f"{more + recorded} more field(s) differ" + (f" ({recorded} recorded calibration facts)"
                                                                     if recorded else ""))
        total = len(self.ranges) + self.ranges_unchanged + len(self.ranges_removed) + len(self.ranges_added)
        if self.ranges:
            top = self.ranges[0]
            bits.append(f"{len(self.ranges)} of {total} ranges moved, largest {top.tensor} amax "
                        f"{amax(top.old):.4g} -> {amax(top.new):.4g} (x{top.ratio:.3g})")
        return "pin: " + "; ".join(bits)


def _short(value: Any) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:60]


def _ranges(side: Side) -> dict[str, Range]:
    assert side.bundle is not None
    cal = (side.bundle.build["build"].get("extra") or {}).get("calibration") or {}
    return {str(k): (float(v[0]), float(v[1])) for k, v in dict(cal.get("ranges") or {}).items()}


def _facts(side: Side) -> Mapping[str, Any]:
    assert side.bundle is not None
    cal = (side.bundle.build["build"].get("extra") or {}).get("calibration") or {}
    return {k: cal.get(k) for k in CALIBRATION_FACTS} if cal else {}


def pin_changes(old: Side, new: Side) -> PinChange:
    """The pin block of one paired config (both sides have a bundle)."""
    assert old.bundle is not None and new.bundle is not None
    ca, cb = old.bundle.config, new.bundle.config
    fields: list[tuple[str, Any, Any]] = []
    if ca.get("onnx_sha256") != cb.get("onnx_sha256"):
        fields.append(("onnx_sha256", ca.get("onnx_sha256"), cb.get("onnx_sha256")))
    fields += [(c.path, c.old, c.new) for c in changes(ca.get("pinned") or {}, cb.get("pinned") or {})
               if not any(c.path == p or c.path.startswith(p + ".") for p in _PATH_FIELDS)]
    shown = {k for k, _, _ in fields}
    fa, fb = _facts(old), _facts(new)
    for key in CALIBRATION_FACTS:
        if fa.get(key) != fb.get(key) and f"calibration.{key}" not in shown:
            fields.append((f"{RECORDED}.{key}", fa.get(key), fb.get(key)))
    ra, rb = _ranges(old), _ranges(new)
    moved = [RangeChange(t, ra[t], rb[t]) for t in sorted(set(ra) & set(rb)) if ra[t] != rb[t]]
    moved.sort(key=lambda r: (-r.size, r.tensor))
    return PinChange((ca.get("config_hash"), cb.get("config_hash")), tuple(fields), tuple(moved),
                     tuple(sorted(set(rb) - set(ra))), tuple(sorted(set(ra) - set(rb))),
                     sum(1 for t in set(ra) & set(rb) if ra[t] == rb[t]))
