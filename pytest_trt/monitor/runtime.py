"""``OutputMonitor``: the golden's output distribution watched inside a serving process.

Per monitored output, every observed batch adds its samples' classifier statistics (max softmax confidence,
entropy, top-2 margin: :func:`pytest_trt.compare.distribution.per_sample_top1`, the golden check's own code) to
fixed-size state: totals and fixed-bin histograms since start, and the sums of the open window.  When a window
holds ``policy.window`` samples it is judged and a new one opens, so memory does not grow with traffic.

A judged window's drift per statistic is ``(window mean - golden mean) / SD`` with
``SD = max(golden SD * sqrt(1 + N / n), floor)`` (:meth:`~pytest_trt.monitor.spec.StatReference.unit`): the
golden's bootstrap SD scaled to a window of ``n`` samples, the golden's own uncertainty included.  A window
breaches when one ``|drift|`` exceeds ``alert_sd``; ``confirm`` breaching windows in a row raise the alert, and
it clears only on a window whose every ``|drift|`` is below ``clear_sd`` (hysteresis).

Thread-safe: the statistics of a batch are computed outside the lock (each thread has its own work buffers),
only the few sums are added under it.  Imports numpy and nothing else outside the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.compare import distribution
from pytest_trt.compare.distribution import STATS
from pytest_trt.compare.workspace import Workspace
from pytest_trt.errors import MonitorError
from pytest_trt.monitor.spec import MonitorSpec, OutputReference, Policy, load_spec

OK, WARMING_UP, PENDING, ALERT = "ok", "warming up", "pending", "alert"


@dataclass(frozen=True)
class StatStatus:
    """One statistic of one output: the golden's mean and the drift of the last judged and of the open window."""

    stat: str
    golden_mean: float
    window_mean: float | None  # the last judged window's mean (None before the first)
    drift_sd: float | None  # its signed drift in SDs
    current_mean: float | None  # the open window's mean so far (None while empty)
    current_drift_sd: float | None  # its drift, for a look only: the alert judges full windows
    total: float  # the sum over every finite sample observed (the mean since start is total / samples)

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class OutputStatus:
    """One output's state."""

    output: str
    state: str  # "warming up" (no window judged yet), "ok", "pending" (breaching, not yet confirmed), "alert"
    samples: int  # finite samples observed
    nonfinite: int  # samples with NaN/Inf scores, kept out of the statistics
    windows: int  # windows judged
    window_samples: int  # samples in the open window
    breaches: int  # breaching windows in a row
    alerts: int  # times the alert was raised
    first_alert_at: int | None  # samples observed when it was first raised
    stats: tuple[StatStatus, ...]
    histograms: Mapping[str, tuple[int, ...]]

    @property
    def alert(self) -> bool:
        return self.state == ALERT

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in vars(self).items() if k not in ("stats", "histograms")}
        d["alert"] = self.alert
        d["stats"] = {s.stat: s.to_dict() for s in self.stats}
        d["histograms"] = {k: list(v) for k, v in self.histograms.items()}
        return d

    def line(self) -> str:
        """One line: state, samples and each statistic's last drift."""
        drifts = ", ".join(f"{s.stat} {'-' if s.drift_sd is None else f'{s.drift_sd:+.2f}'} SD" for s in self.stats)
        extra = f", first raised at sample {self.first_alert_at}" if self.first_alert_at is not None else ""
        return (f"{self.output}: {self.state.upper()}: {self.samples} samples, {self.windows} windows judged; "
                f"last window drift: {drifts}{extra}")


@dataclass(frozen=True)
class MonitorStatus:
    """Every output's state; ``alert`` when any output alerts."""

    config: str
    spec_sha256: str
    policy: Policy
    outputs: tuple[OutputStatus, ...]

    @property
    def alert(self) -> bool:
        return any(o.alert for o in self.outputs)

    def output(self, name: str) -> OutputStatus:
        for o in self.outputs:
            if o.output == name:
                return o
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "spec_sha256": self.spec_sha256, "alert": self.alert,
                "policy": self.policy.to_dict(), "outputs": {o.output: o.to_dict() for o in self.outputs}}


class _OutputState:
    """The fixed-size state of one output (guarded by the monitor's lock)."""

    def __init__(self, ref: OutputReference, policy: Policy) -> None:
        self.ref, self.policy = ref, policy
        self.means = np.array([ref.stats[k].mean for k in STATS])
        self.units = np.array([ref.stats[k].unit(ref.samples, policy.window) for k in STATS])
        self.tops = tuple(ref.stats[k].top for k in STATS)
        self.total = 0
        self.nonfinite = 0
        self.sums = np.zeros(len(STATS))
        self.hist = np.zeros((len(STATS), distribution.HISTOGRAM_BINS), np.int64)
        self.win_count = 0
        self.win_sums = np.zeros(len(STATS))
        self.windows = 0
        self.last_means: np.ndarray | None = None
        self.last_drift: np.ndarray | None = None
        self.breaches = 0
        self.alert = False
        self.alerts = 0
        self.first_alert_at: int | None = None

    def add(self, values: np.ndarray, hist: np.ndarray, nonfinite: int) -> None:
        """Add the statistics ``values`` (len(STATS), n) of finite samples, in order, closing full windows."""
        n = values.shape[1]
        self.total += n
        self.nonfinite += nonfinite
        self.sums += values.sum(axis=1)
        self.hist += hist
        start = 0
        while start < n:
            take = min(self.policy.window - self.win_count, n - start)
            self.win_sums += values[:, start : start + take].sum(axis=1)
            self.win_count += take
            start += take
            if self.win_count == self.policy.window:
                self._judge(self.total - (n - start))

    def _judge(self, at: int) -> None:
        means = self.win_sums / self.win_count
        drift = (means - self.means) / self.units
        self.windows += 1
        self.last_means, self.last_drift = means, drift
        self.win_count, self.win_sums = 0, np.zeros(len(STATS))
        worst = float(np.max(np.abs(drift)))
        if self.alert:
            if worst < self.policy.clear_sd:
                self.alert, self.breaches = False, 0
            return
        self.breaches = self.breaches + 1 if worst > self.policy.alert_sd else 0
        if self.breaches >= self.policy.confirm:
            self.alert = True
            self.alerts += 1
            if self.first_alert_at is None:
                self.first_alert_at = at

    def status(self) -> OutputStatus:
        if self.alert:
            state = ALERT
        elif self.windows == 0:
            state = WARMING_UP
        else:
            state = PENDING if self.breaches else OK
        current = self.win_sums / self.win_count if self.win_count else None
        cur_units = (np.array([self.ref.stats[k].unit(self.ref.samples, self.win_count) for k in STATS])
                     if self.win_count else None)
        stats = []
        for i, k in enumerate(STATS):
            stats.append(StatStatus(
                k, float(self.means[i]),
                None if self.last_means is None else float(self.last_means[i]),
                None if self.last_drift is None else float(self.last_drift[i]),
                None if current is None else float(current[i]),
                None if current is None or cur_units is None else float((current[i] - self.means[i]) / cur_units[i]),
                float(self.sums[i]),
            ))
        return OutputStatus(self.ref.name, state, self.total, self.nonfinite, self.windows, self.win_count,
                            self.breaches, self.alerts, self.first_alert_at, tuple(stats),
                            {k: tuple(int(c) for c in self.hist[i]) for i, k in enumerate(STATS)})


class OutputMonitor:
    """Watches a serving process's classifier outputs against a golden's reference distribution.

    ``reference``: a :class:`~pytest_trt.monitor.spec.MonitorSpec` or the path of its JSON file
    (``pytest-trt monitor spec``).  ``policy`` replaces the spec's alert policy.
    """

    def __init__(self, reference: MonitorSpec | str | Path, *, policy: Policy | None = None) -> None:
        spec = reference if isinstance(reference, MonitorSpec) else load_spec(reference)
        self.spec = spec if policy is None else spec.with_policy(policy)
        self._spec_sha256 = spec.sha256
        self._lock = threading.Lock()
        self._local = threading.local()
        self._states = {name: _OutputState(ref, self.spec.policy) for name, ref in self.spec.outputs.items()}

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self._states)

    def _work(self) -> Workspace:
        work: Workspace | None = getattr(self._local, "work", None)
        if work is None:
            work = self._local.work = Workspace()
        return work

    def observe(self, outputs: Mapping[str, Any] | np.ndarray) -> None:
        """Add one batch: ``{output name: (N, C) scores}`` as the engine returned them (names the spec does not
        monitor are ignored), or the array itself when the spec has one output."""
        if not isinstance(outputs, Mapping):
            if len(self._states) != 1:
                raise MonitorError(f"observe() got an array, but the spec monitors {len(self._states)} outputs "
                                   f"({', '.join(self._states)}); pass {{name: array}}")
            outputs = {next(iter(self._states)): outputs}
        for name, scores in outputs.items():
            state = self._states.get(name)
            if state is None:
                continue
            values, hist, bad = self._statistics(state, np.asarray(scores))
            with self._lock:
                state.add(values, hist, bad)

    def _statistics(self, state: _OutputState, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        ref = state.ref
        if x.ndim != 2 or x.shape[1] != ref.classes or not np.issubdtype(x.dtype, np.floating):
            raise MonitorError(f"output {ref.name!r}: got {x.dtype} scores of shape {x.shape}; the spec monitors "
                               f"float scores of shape (N, {ref.classes})")
        stats, _ = distribution.per_sample_top1(x, logits=ref.logits, work=self._work())
        values = np.stack([stats[k] for k in STATS])
        finite = np.isfinite(values).all(axis=0)
        bad = int(values.shape[1] - np.count_nonzero(finite))
        if bad:
            values = values[:, finite]
        hist = np.stack([distribution.histogram(values[i], top) for i, top in enumerate(state.tops)])
        return values, hist, bad

    def status(self) -> MonitorStatus:
        """A consistent snapshot of every output's state."""
        with self._lock:
            outputs = tuple(s.status() for s in self._states.values())
        return MonitorStatus(self.spec.config, self._spec_sha256, self.spec.policy, outputs)

    def export_prometheus(self, registry: Any = None) -> Any:
        """Expose this monitor's metrics in a ``prometheus_client`` registry (the default one when None); returns
        the registered collector.  Needs ``pip install 'pytest-trt[monitor]'``."""
        from pytest_trt.monitor.prometheus import register

        return register(self, registry)
