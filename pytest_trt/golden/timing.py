"""Latency/throughput snapshots beside a golden: ``trt_golden.check(..., latency_drift=0.10, throughput_drift=0.15)``.

An approved update (``--trt-update-golden --trt-approve``) measures the
engine and writes ``<golden_dir>/<config name>.timing.json`` (atomically)
with the per-round numbers, the device and the backend versions.  A check
measures again and compares with :func:`pytest_trt.compare.latency.timing_drift`;
a breach is measured once more and fails only when it repeats.  Numbers from
another device class or backend version are a provenance difference handled
by the golden provenance policy: under ``compare`` they are compared and the
difference is reported (a note, and in any failure message); under ``fail``,
or with the field in ``trt_golden_provenance_fail_on``, the check fails as
tainted.

The inputs timed are the golden dataset's first batch (the first profile's
opt batch, at most the dataset's size).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_trt.common.fileio import write_json_atomic
from pytest_trt.errors import GoldenCorrupt, GoldenMissing, GoldenTainted
from pytest_trt.golden.results import GoldenScope

if TYPE_CHECKING:
    from pytest_trt.compare.latency import DriftVerdict
    from pytest_trt.engines.benchmark import BenchmarkResult

__all__ = ["TimingOptions", "device_class", "split_options", "store", "timing_path", "verify"]

SUFFIX = ".timing.json"
SCHEMA = 1
_KEYS = ("latency_drift", "throughput_drift", "timing_rounds", "timing_iterations")


@dataclass(frozen=True)
class TimingOptions:
    latency_drift: float | None
    throughput_drift: float | None
    rounds: int = 7
    iterations: int = 20
    warmup: int = 5


def split_options(thresholds: dict[str, Any]) -> TimingOptions | None:
    """Pop the timing keywords out of ``check()``'s thresholds; None when no drift limit was asked for."""
    given = {k: thresholds.pop(k) for k in _KEYS if k in thresholds}
    if given.get("latency_drift") is None and given.get("throughput_drift") is None:
        return None
    return TimingOptions(given.get("latency_drift"), given.get("throughput_drift"),
                         rounds=int(given.get("timing_rounds", 7)), iterations=int(given.get("timing_iterations", 20)))


def timing_path(golden_dir: Path, config_name: str) -> Path:
    return golden_dir / f"{config_name}{SUFFIX}"


def device_class(device: Mapping[str, Any]) -> str:
    """What makes timings comparable: the GPU's name and compute capability, or the CPU's model and ISA."""
    if device.get("kind") == "gpu":
        return f"gpu {device.get('name')} sm {device.get('compute_capability')}"
    return f"{device.get('kind', 'unknown')} {device.get('name')} {'+'.join(device.get('isa', []))}".strip()


def _inputs(scope: GoldenScope, engine: Any) -> dict[str, np.ndarray]:
    from pytest_trt.golden.store import GoldenFile

    path = scope.path_for(engine.config.name)
    with GoldenFile(path) as g:
        batch = g.samples
        if engine.config.profiles:
            batch = min(batch, engine.config.profiles[0].inputs[0].opt[0])
        return {name: np.asarray(ds[:batch]) for name, ds in g.inputs().items()}


def _measure(engine: Any, feeds: Mapping[str, np.ndarray], opts: TimingOptions) -> BenchmarkResult:
    return engine.benchmark(feeds, warmup=opts.warmup, iterations=opts.iterations,  # type: ignore[no-any-return]
                            rounds=opts.rounds)


def store(scope: GoldenScope, engine: Any, opts: TimingOptions) -> Path:
    """Measure ``engine`` on the golden's first batch and write the timing snapshot."""
    result = _measure(engine, _inputs(scope, engine), opts)
    path = timing_path(scope.settings.golden_dir, engine.config.name)
    doc = {"schema": SCHEMA, "config": engine.config.name, "config_hash": engine.result.config_hash,
           "device_class": device_class(engine.result.device), "versions": dict(engine.result.versions),
           "approval": scope.settings.approve, "benchmark": result.to_json()}
    write_json_atomic(path, doc, indent=1)
    return path


def _load(scope: GoldenScope, name: str) -> dict[str, Any]:
    from pytest_trt.compare.render import update_command

    path = timing_path(scope.settings.golden_dir, name)
    if not path.is_file():
        raise GoldenMissing(
            f"no timing snapshot for {name!r}: {path} does not exist. Timings are never recorded silently; "
            "measure and approve them with:\n  "
            + update_command(scope.command_nodeid, args=scope.settings.command_args),
            path=str(path))
    from pytest_trt.engines.benchmark import BenchmarkResult

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        BenchmarkResult.from_json(doc["benchmark"])
        str(doc["device_class"]), dict(doc["versions"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GoldenCorrupt(f"timing snapshot {path} cannot be read ({exc}); restore it from version control or "
                            f"record it again with an approved update", path=str(path)) from None
    return dict(doc)


def verify(scope: GoldenScope, engine: Any, opts: TimingOptions) -> list[DriftVerdict]:
    """Measure and compare with the timing snapshot; raise GoldenRegression on a drift that repeats."""
    __tracebackhide__ = True
    from pytest_trt.compare.latency import timing_drift
    from pytest_trt.engines.benchmark import BenchmarkResult
    from pytest_trt.errors import GoldenRegression

    name = engine.config.name
    doc = _load(scope, name)
    differs = _provenance_differences(doc, engine)
    policy = scope.settings.provenance
    fatal = [text for field, text in differs if policy.fatal(field)]
    if fatal:
        raise GoldenTainted(
            f"timing snapshot of {name!r} is tainted: {'; '.join(fatal)}, and the golden provenance policy "
            f"({policy.mode}, fail_on={list(policy.fail_on)}) fails on it. Record new timings with an approved update "
            f"on this machine, or compare anyway with --trt-golden-provenance compare",
            path=str(timing_path(scope.settings.golden_dir, name)))
    golden = BenchmarkResult.from_json(doc["benchmark"])
    feeds = _inputs(scope, engine)
    verdicts = timing_drift(golden, _measure(engine, feeds, opts), latency_drift=opts.latency_drift,
                            throughput_drift=opts.throughput_drift)
    if any(v.failed for v in verdicts):  # repeated measurement: a breach must show twice
        verdicts = timing_drift(golden, _measure(engine, feeds, opts), latency_drift=opts.latency_drift,
                                throughput_drift=opts.throughput_drift)
    if any(v.failed for v in verdicts):
        lines = [f"{engine.label}: speed regressed against the timing snapshot "
                 f"{timing_path(scope.settings.golden_dir, name)} (measured twice):"]
        lines += [f"  {v.line()}" for v in verdicts]
        lines.append("If the slowdown is expected, record new timings with an approved update; otherwise find what "
                     "changed in the engine (build record diff, tactics, precision).")
        lines += [f"  provenance differs: {text}" for _, text in differs]
        raise GoldenRegression("\n".join(lines))
    if differs:
        scope.note(f"timing snapshot of {name!r}: provenance differs ({'; '.join(t for _, t in differs)}); "
                   "within the drift limits; approve a refresh to record timings on this machine")
    return verdicts


def _provenance_differences(doc: Mapping[str, Any], engine: Any) -> list[tuple[str, str]]:
    """``(policy field, text)`` for each way the snapshot's measuring conditions differ from the engine's."""
    now_class = device_class(engine.result.device)
    out = []
    if doc["device_class"] != now_class:
        out.append(("device", f"device class (timing snapshot {doc['device_class']!r}, now {now_class!r})"))
    then, now = doc["versions"].get("backend"), engine.result.versions.get("backend")
    if then != now:
        out.append(("backend_version", f"backend version (timing snapshot {then!r}, now {now!r})"))
    return out
