"""The monitor spec: a golden's reference distribution as a small JSON file a service ships.

``pytest-trt monitor spec golden/NAME.h5 -o NAME.monitor.json`` writes it (:mod:`pytest_trt.monitor.cli`);
a serving process loads it with :func:`load_spec` and hands it to
:class:`~pytest_trt.monitor.runtime.OutputMonitor`.  Per output it holds, for each classifier statistic
(:data:`~pytest_trt.compare.distribution.STATS`), the golden's mean, the bootstrap SD of that mean, the SD floor
and the golden set's fixed-bin histogram; then the alert policy, and where it came from (the golden file's sha256,
the snapshot's generation, provenance and approval).  The document carries the sha256 of its own canonical JSON
(every key but ``sha256``): a spec edited by hand fails to load, naming the file.

The statistics, their order and their histogram bins are :mod:`pytest_trt.compare.distribution`'s.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.compare import distribution
from pytest_trt.compare.distribution import STATS
from pytest_trt.errors import MonitorError

FORMAT = "pytest-trt-monitor"
SCHEMA = 1


@dataclass(frozen=True)
class Policy:
    """When the monitor alerts.

    ``window``: samples per judged window (the minimum sample count: a window is judged only when full).
    ``alert_sd``: a window breaches when one statistic's mean is more than this many SDs from the golden's.
    ``confirm``: that many breaching windows in a row raise the alert.
    ``clear_sd``: an alert clears on the first window whose every statistic is within this many SDs (hysteresis:
    between ``clear_sd`` and ``alert_sd`` nothing changes).
    """

    alert_sd: float = 2.0
    clear_sd: float = 1.0
    window: int = 1000
    confirm: int = 3

    def __post_init__(self) -> None:
        for name in ("alert_sd", "clear_sd"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise MonitorError(f"policy {name}={value!r} must be a positive number")
            object.__setattr__(self, name, float(value))
        for name in ("window", "confirm"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise MonitorError(f"policy {name}={value!r} must be a positive integer")
        if self.clear_sd > self.alert_sd:
            raise MonitorError(f"policy clear_sd={self.clear_sd} is above alert_sd={self.alert_sd}; "
                               "an alert clears below clear_sd, so it must be at most alert_sd")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def replace(self, **changes: Any) -> Policy:
        return Policy(**{**self.to_dict(), **{k: v for k, v in changes.items() if v is not None}})


@dataclass(frozen=True)
class StatReference:
    """One statistic of one output over the golden set."""

    mean: float
    sd: float  # bootstrap SD of the golden's mean (pytest_trt.compare.distribution.bootstrap_sds)
    floor: float  # the smallest SD a drift is measured in (pytest_trt.compare.distribution.sd_floor)
    top: float  # histogram range [0, top]
    counts: tuple[int, ...]  # the golden set's histogram

    def unit(self, golden_samples: int, window: float) -> float:
        """The SD of (window mean - golden mean) for a window of ``window`` samples: the golden's SD, scaled.

        The golden mean's bootstrap SD ``sd`` over ``N`` samples stands for a per-sample SD of ``sd * sqrt(N)``;
        a window of ``n`` samples has its own mean's SD ``sd * sqrt(N / n)``, and the two are independent.
        """
        return max(self.sd * math.sqrt(1.0 + golden_samples / window), self.floor)

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "sd": self.sd, "floor": self.floor,
                "histogram": {"range": [0.0, self.top], "counts": list(self.counts)}}


@dataclass(frozen=True)
class OutputReference:
    """A classifier output of the golden: its class count, whether scores are logits, and its statistics."""

    name: str
    classes: int
    logits: bool
    samples: int
    stats: Mapping[str, StatReference]

    def to_dict(self) -> dict[str, Any]:
        return {"classes": self.classes, "logits": self.logits, "samples": self.samples,
                "stats": {k: self.stats[k].to_dict() for k in STATS}}


@dataclass(frozen=True)
class MonitorSpec:
    """What a service's monitor compares with: the golden's reference statistics and the alert policy."""

    config: str
    outputs: Mapping[str, OutputReference]
    policy: Policy = field(default_factory=Policy)
    golden: Mapping[str, Any] = field(default_factory=dict)  # file, sha256, generation, provenance, approval
    source: str = "<spec>"  # where it was loaded from (error messages)

    def body(self) -> dict[str, Any]:
        """The document without its sha256."""
        return {"format": FORMAT, "schema": SCHEMA, "config": self.config, "golden": dict(self.golden),
                "policy": self.policy.to_dict(),
                "outputs": {name: ref.to_dict() for name, ref in sorted(self.outputs.items())}}

    @property
    def sha256(self) -> str:
        return _digest(self.body())

    def to_json(self) -> str:
        """The spec as written to disk: indented JSON, keys sorted, its sha256 last."""
        doc = self.body()
        doc["sha256"] = _digest(doc)
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    def with_policy(self, policy: Policy) -> MonitorSpec:
        return MonitorSpec(self.config, self.outputs, policy, self.golden, self.source)


def output_reference(name: str, scores: Any, *, logits: bool | None = None,
                     recorded: Mapping[str, tuple[float, float]] | None = None, rows: int = 4096) -> OutputReference:
    """The reference of one classifier output from its golden scores ``(N, C)`` (an array or an h5py dataset, read
    ``rows`` at a time): histograms over the fixed bins and, unless ``recorded`` gives the golden's
    ``{stat: (mean, bootstrap SD)}``, means and bootstrap SDs computed as the golden check computes them.
    """
    n, classes = int(scores.shape[0]), int(scores.shape[1])
    if logits is None:
        logits = not distribution.looks_like_probabilities(np.asarray(scores[:rows]))
    tops = [distribution.histogram_top(k, classes) for k in STATS]
    counts = np.zeros((len(STATS), distribution.HISTOGRAM_BINS), np.int64)
    values: dict[str, list[Any]] = {k: [] for k in STATS}
    for start in range(0, n, rows):
        stats, _ = distribution.per_sample_top1(np.asarray(scores[start : start + rows]), logits=logits)
        counts += np.stack([distribution.histogram(stats[k], tops[i]) for i, k in enumerate(STATS)])
        if recorded is None:
            for k in STATS:
                values[k].append(stats[k])
    if recorded is None:
        whole = {k: np.concatenate(v) for k, v in values.items()}
        sds = distribution.bootstrap_sds(whole)
        recorded = {k: (float(whole[k].mean()), sds[k]) for k in STATS}
    return OutputReference(name, classes, logits, n, {
        k: StatReference(recorded[k][0], recorded[k][1], distribution.sd_floor(recorded[k][0]), tops[i],
                         tuple(int(c) for c in counts[i]))
        for i, k in enumerate(STATS)})


def _digest(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_spec(path: str | Path) -> MonitorSpec:
    """Read a spec file; :class:`~pytest_trt.errors.MonitorError` names the file and the fix when it cannot be
    used (missing, not JSON, another format or schema, a sha256 that does not match its content)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MonitorError(f"{p}: cannot read the monitor spec ({exc.__class__.__name__}: {exc})",
                           path=str(p)) from None
    return spec_from_json(text, str(p))


def spec_from_json(text: str, source: str = "<spec>") -> MonitorSpec:
    """A spec from its JSON text (``source`` names it in errors)."""
    regenerate = f"write it again with `pytest-trt monitor spec golden/NAME.h5 -o {source}`"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise MonitorError(f"{source}: not a monitor spec: invalid JSON ({exc}); {regenerate}", path=source) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise MonitorError(f"{source}: not a monitor spec (no \"format\": \"{FORMAT}\"); {regenerate}", path=source)
    if doc.get("schema") != SCHEMA:
        raise MonitorError(f"{source}: monitor spec schema {doc.get('schema')!r}, this pytest-trt reads {SCHEMA}; "
                           f"{regenerate} with this version", path=source)
    stored = doc.pop("sha256", None)
    actual = _digest(doc)
    if stored != actual:
        raise MonitorError(
            f"{source}: sha256 check failed: the spec says {stored!r}, its content hashes to {actual}; it was changed "
            f"after `pytest-trt monitor spec` wrote it. Do not edit a spec by hand: {regenerate} "
            "(thresholds: --alert-sd, --clear-sd, --window, --confirm)", path=source)
    try:
        outputs = {name: _output(name, o) for name, o in doc["outputs"].items()}
        spec = MonitorSpec(str(doc["config"]), outputs, Policy(**doc["policy"]), dict(doc["golden"]), source)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MonitorError(f"{source}: malformed monitor spec ({exc.__class__.__name__}: {exc}); {regenerate}",
                           path=source) from None
    if not outputs:
        raise MonitorError(f"{source}: the spec has no outputs; {regenerate}", path=source)
    return spec


def _output(name: str, o: Mapping[str, Any]) -> OutputReference:
    stats = {}
    for k in STATS:
        s = o["stats"][k]
        lo, top = s["histogram"]["range"]
        stats[k] = StatReference(float(s["mean"]), float(s["sd"]), float(s["floor"]), float(top),
                                 tuple(int(c) for c in s["histogram"]["counts"]))
        if lo != 0.0:
            raise ValueError(f"output {name!r} {k}: histogram range starts at {lo}, not 0")
    return OutputReference(name, int(o["classes"]), bool(o["logits"]), int(o["samples"]), stats)
