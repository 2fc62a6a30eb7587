"""The upgrade review of paired configs: verdict first, then structure, outputs, environment, noise."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_trt.audit.bundle_diff import changes
from pytest_trt.audit.failures import FAILED_SUFFIX
from pytest_trt.buildlog.record_diff import RecordDiff, diff_records
from pytest_trt.compare.rules import report_bounds
from pytest_trt.upgrade import units
from pytest_trt.upgrade.pairing import VERIFY_STAGE, Pairing, Side
from pytest_trt.upgrade.pin import PinChange, pin_changes

UNCHANGED = "unchanged"
WITHIN = "changed within thresholds"
CHANGED_UNCHECKED = "changed (outputs not checked)"
REGRESSION = "regression"
NOT_COMPARED = "could not compare"
#: worst first: the report sorts configs by this
SEVERITY = {REGRESSION: 0, NOT_COMPARED: 1, CHANGED_UNCHECKED: 2, WITHIN: 3, UNCHANGED: 4}

#: metric name in OutputMetrics.to_dict -> (threshold name, "max" or "min")
_ELEMENT_METRICS: dict[str, tuple[str | None, str | None]] = {**report_bounds(), "accuracy": (None, None)}
#: relative allowance for a top-1 drop computed from two rounded fractions (far below one sample in a billion)
_ROUNDING = 1e-9
#: environment keys that are noise for a reviewer (they differ between any two runs)
_NOISE_ENV = ("hostname", "timestamp", "git", "cwd", "rootdir", "pid", "user")
#: golden.json verdict of a test that used the engine and failed before any golden check of it
NOT_CHECKED = "not checked"
#: the environment row of a backend or backend-version change (always the first row)
TOOLCHAIN = "toolchain"


@dataclass(frozen=True)
class MetricRow:
    """One golden metric of one output (and tag) in both runs, with its threshold."""

    test: str
    output: str
    metric: str
    old: float | None
    new: float | None
    threshold: float | None = None
    bound: str | None = None  # "max" or "min"
    tag: str | None = None
    golden: float | None = None  # the golden's own figure, where it has one (accuracy, distribution means)

    @property
    def breached(self) -> bool:
        """Past the threshold; at it is within, as in the check.  A top-1 drop is the difference of two stored
        fractions (0.92 - 0.91 is 0.010000000000000009), so it is compared with a rounding allowance."""
        if self.new is None or self.threshold is None:
            return False
        limit = self.threshold + (_ROUNDING * max(1.0, abs(self.threshold)) if self.metric == "top1_drop" else 0.0)
        return self.new > limit if self.bound == "max" else self.new < self.threshold

    @property
    def changed(self) -> bool:
        """Both runs stored the figure and it differs (an approval run stores no check figures: not a move)."""
        return (self.old is not None and self.new is not None and self.old != self.new
                and not self.metric.startswith("mean "))  # a mean is shown beside its drift, which is judged

    @property
    def unit(self) -> str:
        return units.unit(self.metric)

    def text(self, which: str) -> str:
        """``old``, ``new``, ``golden`` or ``threshold`` as the check renders it (its unit)."""
        return units.text(self.metric, getattr(self, which))

    def to_dict(self) -> dict[str, Any]:
        """Figures in the metric's unit (``unit``: "%", "SD" or ""), as the terminal and HTML show them;
        ``raw`` keeps the stored fractions."""
        keys = ("old", "new", "golden", "threshold")
        return {"test": self.test, "output": self.output, "metric": self.metric, "tag": self.tag,
                "bound": self.bound, "breached": self.breached, "unit": self.unit,
                **{k: units.value(self.metric, getattr(self, k)) for k in keys},
                "text": {k: self.text(k) for k in keys}, "raw": {k: getattr(self, k) for k in keys}}

    def reason(self) -> str:
        return (f"{self.output}{f'[tag={self.tag}]' if self.tag else ''}: {self.metric} {self.text('new')} "
                f"{units.breach_op(self.metric, self.bound)} threshold {self.text('threshold')} ({self.test})")


@dataclass(frozen=True)
class ConfigReview:
    name: str
    version: str
    verdict: str
    reasons: tuple[str, ...]
    old: Side | None
    new: Side | None
    structure: RecordDiff | None = None
    metrics: tuple[MetricRow, ...] = ()
    environment: tuple[tuple[str, Any, Any], ...] = ()
    noise: tuple[tuple[str, Any, Any], ...] = ()
    outputs_old: Mapping[str, Any] = field(default_factory=dict)  # test -> output summaries (pictures)
    outputs_new: Mapping[str, Any] = field(default_factory=dict)
    localization: Mapping[str, Any] | None = None
    pin: PinChange | None = None
    toolchain: tuple[str, str] | None = None  # "backend version" of OLD and NEW
    unchecked: tuple[tuple[str, str], ...] = ()  # (test id, first line of its failure): no golden check ran
    approve: str | None = None  # the command that approves NEW's outputs (None: nothing to approve)
    quant_errors: Mapping[str, Any] | None = None

    @property
    def title(self) -> str:
        return f"{self.name} v{self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.name, "version": self.version, "verdict": self.verdict, "reasons": list(self.reasons),
            "old": _side_dict(self.old), "new": _side_dict(self.new),
            "structure": self.structure.to_dict() if self.structure is not None else None,
            "metrics": [m.to_dict() for m in self.metrics],
            "environment": [{"key": k, "old": a, "new": b} for k, a, b in self.environment],
            "pin": self.pin.to_dict() if self.pin is not None else None,
            "toolchain": None if self.toolchain is None else {
                "old": self.toolchain[0], "new": self.toolchain[1], "changed": self.toolchain[0] != self.toolchain[1]},
            "unchecked": [{"test": t, "message": m} for t, m in self.unchecked],
            "approve": self.approve,
            "quant_errors": dict(self.quant_errors) if self.quant_errors is not None else None,
            "noise": [{"key": k, "old": a, "new": b} for k, a, b in self.noise],
            "localization": dict(self.localization) if self.localization else None,
        }


def _side_dict(side: Side | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {"path": side.path, "backend": side.backend, "backend_version": side.backend_version,
            "sha256": side.bundle.sha256 if side.bundle is not None else None,
            "build_failed": dict(side.failure) if side.failure is not None else None}


def _unpaired_dict(side: Side) -> dict[str, Any]:
    return {**(_side_dict(side) or {}), "config": side.name, "version": side.version}


@dataclass(frozen=True)
class UpgradeReport:
    old_label: str
    new_label: str
    reviews: tuple[ConfigReview, ...]
    only_old: tuple[Side, ...]
    only_new: tuple[Side, ...]
    allow_unchecked: bool = False  # configs whose outputs were not checked pass (upgrade-report --allow-unchecked)

    @property
    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in SEVERITY}
        for r in self.reviews:
            out[r.verdict] += 1
        return out

    @property
    def ok(self) -> bool:
        """Nothing regressed, everything was compared (outputs included, unless allowed), nothing unpaired."""
        fine = (UNCHANGED, WITHIN, CHANGED_UNCHECKED) if self.allow_unchecked else (UNCHANGED, WITHIN)
        return all(r.verdict in fine for r in self.reviews) and not (self.only_old or self.only_new)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old_label, "new": self.new_label, "counts": self.counts, "ok": self.ok,
            "allow_unchecked": self.allow_unchecked,
            "configs": [r.to_dict() for r in self.reviews],
            "only_old": [_unpaired_dict(s) for s in self.only_old],
            "only_new": [_unpaired_dict(s) for s in self.only_new],
        }


def _drop(m: Mapping[str, Any]) -> float | None:
    return None if m.get("accuracy_drop") is None else -float(m["accuracy_drop"])


def _metric_rows(test: str, output: str, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[MetricRow]:
    om, nm = (old or {}).get("metrics", {}), new.get("metrics", {})
    th = new.get("thresholds", {})
    rows = []
    for metric, (tname, bound) in _ELEMENT_METRICS.items():
        if om.get(metric) is None and nm.get(metric) is None:
            continue
        rows.append(MetricRow(test, output, metric, om.get(metric), nm.get(metric),
                              th.get(tname) if tname else None, bound))
    if nm.get("accuracy") is not None:
        rows = [r if r.metric != "accuracy" else dataclasses.replace(r, golden=nm.get("golden_accuracy"))
                for r in rows]
    if nm.get("accuracy_drop") is not None and th.get("top1_drop") is not None:
        rows.append(MetricRow(test, output, "top1_drop", _drop(om), _drop(nm), th["top1_drop"], "max"))
    for stat, d in sorted(nm.get("drift", {}).items()):
        od = om.get("drift", {}).get(stat, {})
        # the means first: OLD's obtained (the golden's own when OLD was the approval run), NEW's, the golden's
        old_mean = od.get("obtained") if od else (d.get("golden") if old is None or not om else None)
        rows.append(MetricRow(test, output, f"mean {stat}", old_mean, d.get("obtained"), golden=d.get("golden")))
        rows.append(MetricRow(test, output, f"drift_sd:{stat}", od.get("drift_sd"), d.get("drift_sd"),
                              th.get("drift_sd"), "max"))
    for tag, t in sorted(nm.get("tags", {}).items()):
        ot = om.get("tags", {}).get(tag, {})
        for key in ("accuracy", "agreement"):
            if t.get(key) is not None:
                rows.append(MetricRow(test, output, key, ot.get(key), t.get(key), tag=tag))
        if t.get("accuracy") is not None and t.get("golden_accuracy") is not None and th.get("top1_drop") is not None:
            od = None if ot.get("accuracy") is None else float(ot["golden_accuracy"]) - float(ot["accuracy"])
            rows.append(MetricRow(test, output, "top1_drop", od, float(t["golden_accuracy"]) - float(t["accuracy"]),
                                  th["top1_drop"], "max", tag=tag))
    return rows


def _summaries(side: Side) -> dict[str, Any]:
    """test id -> {output: summary} of the checks that stored one."""
    golden = (side.bundle.golden if side.bundle is not None else None) or {}
    return {test: v["outputs"]["outputs"] for test, v in sorted(golden.items())
            if isinstance(v.get("outputs"), Mapping) and "outputs" in v["outputs"]}


def _counterpart(test: str, old: Mapping[str, Any]) -> Any:
    """The OLD run's check of ``test``: the same test id, else the one test of the same function name."""
    if test in old:
        return old[test]
    same = [v for k, v in old.items() if k.rsplit("::", 1)[-1] == test.rsplit("::", 1)[-1]]
    return same[0] if len(same) == 1 else {}


def _environment(old: Side, new: Side) -> tuple[list[tuple[str, Any, Any]], list[tuple[str, Any, Any]]]:
    assert old.bundle is not None and new.bundle is not None
    ea, eb = old.bundle.environment, new.bundle.environment
    main: list[tuple[str, Any, Any]] = []
    noise: list[tuple[str, Any, Any]] = []
    tool = _toolchain(old, new)
    if tool[0] != tool[1]:
        main.append((TOOLCHAIN, *tool))
    fa = dict(x.split("==", 1) for x in ea.get("pip_freeze", ()) if "==" in x)
    fb = dict(x.split("==", 1) for x in eb.get("pip_freeze", ()) if "==" in x)
    for c in changes({k: v for k, v in ea.items() if k != "pip_freeze"}, {k: v for k, v in eb.items()
                                                                           if k != "pip_freeze"}):
        if c.path == "backend.version" and tool[0] != tool[1]:
            continue  # folded into the toolchain row
        (noise if c.path.split(".")[0] in _NOISE_ENV else main).append((c.path, c.old, c.new))
    main += [(f"package {k}", fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    ba, bb = old.bundle.build["build"], new.bundle.build["build"]
    for c in changes(ba.get("durations", {}), bb.get("durations", {})):
        noise.append((f"build seconds {c.path}", c.old, c.new))
    if old.path != new.path:
        noise.append(("bundle file (in OLD / NEW)", old.file, new.file))
    return main, noise


def _toolchain(old: Side, new: Side) -> tuple[str, str]:
    return f"{old.backend} {old.backend_version}", f"{new.backend} {new.backend_version}"


def _first_error(message: str) -> str:
    """The builder's own error line of a BuildFailed message, not its header nor the CUDA-probe noise."""
    lines = [x.strip() for x in message.splitlines()[1:] if x.strip()]
    useful = [x for x in lines if "Error" in x and "Thread context" not in x and "catchCudaError" not in x]
    return (useful or lines or [message.strip()])[0][:300]


def _failed_review(old: Side, new: Side) -> ConfigReview:
    where = "OLD" if old.failure is not None else "NEW"
    failed = old if old.failure is not None else new
    note = failed.failure or {}
    if note.get("stage") == VERIFY_STAGE:
        what = "build-failure note" if failed.file.endswith(FAILED_SUFFIX) else "bundle"
        reasons = [f"could not verify the {where} {what} {failed.file}: {note.get('message')}"]
    else:
        reasons = [f"could not build on {where} ({failed.backend} {failed.backend_version}, "
                   f"stage {note.get('stage')}): {_first_error(str(note.get('message', '')))}"]
    if old.failure is not None and new.failure is not None:
        stages = {str(side.failure.get("stage")) for side in (old, new) if side.failure is not None}
        reasons = (["could not build on OLD nor on NEW"] if VERIFY_STAGE not in stages else
                   [f"could not use the bundle (or build) on OLD nor on NEW: {old.file}, {new.file}"])
    tool = _toolchain(old, new)
    return ConfigReview(old.name, old.version, NOT_COMPARED, tuple(reasons), old, new, toolchain=tool,
                        environment=((TOOLCHAIN, *tool),) if tool[0] != tool[1] else ())


def _change_summary(structure: RecordDiff | None, rows: list[MetricRow], engine_changed: bool,
                    env: list[tuple[str, Any, Any]]) -> str:
    bits = []
    if structure is not None and structure.has_structure_changes:
        bits.append(f"structure changed ({len(structure.fusions_gained)} fusions gained, "
                    f"{len(structure.fusions_lost)} lost, {len(structure.precision_changes)} precision changes"
                    + (f", {len(structure.replaced_nodes)} replaced nodes" if structure.replaced_nodes else "")
                    + (f", layers {structure.layer_count[0]} -> {structure.layer_count[1]}" if structure.layer_count
                       else "") + ")")
    elif engine_changed:
        bits.append("engine bytes changed, same layers and fusions")
    if rows:
        moved = sum(1 for r in rows if r.changed)
        bits.append(f"{moved} of {len(rows)} golden metrics moved, none past its threshold")
    if env:
        bits.append(f"{len(env)} environment difference(s)")
    return "; ".join(bits) or "no difference a reviewer needs to see"


def review_pair(old: Side, new: Side, *, mask_tactics: bool = True) -> ConfigReview:
    """Compare one config of both runs."""
    if old.bundle is None or new.bundle is None:
        return _failed_review(old, new)
    reasons: list[str] = []
    rec_a, rec_b = old.bundle.record(), new.bundle.record()
    structure = diff_records(rec_a, rec_b, mask_tactics=mask_tactics) if rec_a and rec_b else None
    if structure is None:
        reasons.append("a bundle holds no build record: structure not compared")
    outs_a, outs_b = _summaries(old), _summaries(new)
    outs_a = {test: _counterpart(test, outs_a) for test in outs_b} if outs_b else outs_a
    rows: list[MetricRow] = []
    for test, outputs in outs_b.items():
        for output, summary in sorted(outputs.items()):
            rows += _metric_rows(test, output, outs_a.get(test, {}).get(output), summary)
    env, noise = _environment(old, new)
    unchecked = _unchecked(new)
    breached = [r for r in rows if r.breached]
    engine_changed = old.bundle.engine_sha256 != new.bundle.engine_sha256
    structure_changed = structure is not None and not structure.is_empty
    if breached:
        verdict = REGRESSION
        reasons += [r.reason() for r in breached if r.new is not None and r.threshold is not None]
    elif not (engine_changed or structure_changed or any(r.changed for r in rows) or env):
        verdict = UNCHANGED
    elif rows:
        verdict = WITHIN
    else:
        verdict = CHANGED_UNCHECKED
        reasons += ([f"outputs not checked: {test} failed before its golden check: {message}"
                     for test, message in unchecked] or
                    ["outputs not checked: no test of this config ran a golden check"])
    if verdict in (WITHIN, CHANGED_UNCHECKED):
        reasons.insert(0, _change_summary(structure, rows, engine_changed, env))
    pin = pin_changes(old, new)
    if pin.changed:
        reasons.insert(0, pin.line())
    if outs_a and not outs_b:
        reasons.append("OLD has golden output figures, NEW has none: the NEW run did not check its goldens")
    if rows and all(r.old is None for r in rows if not r.metric.startswith("mean ")):
        reasons.append("OLD stored no golden figures for these checks (an approval run): outputs are judged by "
                       "NEW's check against the golden only")
    return ConfigReview(old.name, old.version, verdict, tuple(reasons), old, new, structure, tuple(rows),
                        tuple(env), tuple(noise), outs_a, outs_b, pin=pin, toolchain=_toolchain(old, new),
                        unchecked=tuple(unchecked), approve=_approve_command(new) if verdict != UNCHANGED else None)


def _unchecked(side: Side) -> list[tuple[str, str]]:
    """(test id, first line of its failure) of the tests that used the engine and failed before a golden check."""
    golden = (side.bundle.golden if side.bundle is not None else None) or {}
    return [(test, str(v.get("message") or "").splitlines()[0] if v.get("message") else "")
            for test, v in sorted(golden.items()) if v.get("verdict") == NOT_CHECKED]


def _approve_command(side: Side) -> str:
    """The command that approves NEW's outputs: the check's own update command where it stored one."""
    golden = (side.bundle.golden if side.bundle is not None else None) or {}
    for v in golden.values():
        for line in str(v.get("message") or "").splitlines():
            if "--trt-update-golden" in line and line.strip().startswith("pytest "):
                return line.strip()
    tests = [t for t, v in sorted(golden.items()) if v.get("verdict") != NOT_CHECKED] or sorted(golden)
    return (f"pytest {' '.join(tests) or '<tests>'} --trt-backend {side.backend} --trt-update-golden "
            '--trt-approve "REASON"')


def build_report(pairing: Pairing, *, old_label: str, new_label: str, mask_tactics: bool = True,
                 allow_unchecked: bool = False) -> UpgradeReport:
    reviews = sorted((review_pair(a, b, mask_tactics=mask_tactics) for a, b in pairing.pairs),
                     key=lambda r: (SEVERITY[r.verdict], r.name, r.version))
    return UpgradeReport(old_label, new_label, tuple(reviews), pairing.only_old, pairing.only_new, allow_unchecked)
