"""Prometheus: a monitor's metrics for ``prometheus_client``, and the alert rules that judge them.

Metrics (labels ``config`` and ``output`` on each; ``stat`` where named):

* ``pytest_trt_monitor_<stat>`` histogram per statistic (``max_confidence``, ``entropy``, ``top2_margin``): the
  golden's fixed bins as buckets, ``_sum`` and ``_count`` since the process started;
* ``pytest_trt_monitor_drift_sd{stat}`` gauge: the last judged window's signed drift in SDs (NaN before one);
* ``pytest_trt_monitor_alert`` gauge: 1 while the monitor's own alert (with hysteresis) is raised;
* ``pytest_trt_monitor_windows_total``, ``pytest_trt_monitor_nonfinite_total`` counters;
* ``pytest_trt_monitor_spec_info{spec_sha256, golden_sha256, golden_generation}``.

:func:`alert_rules` writes a rule file whose alerts judge the histograms' ``_sum`` and ``_count`` over a time range
with the spec's numbers and the runtime's unit (the SD of a ``window``-sample mean, see :func:`drift_expr`), with at
least ``window`` samples in the range, held ``for`` a while and kept firing for a while (hysteresis in time).
``prometheus_client`` is imported only by :func:`register`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, Protocol

from pytest_trt.compare.distribution import HISTOGRAM_BINS, STATS
from pytest_trt.errors import MonitorError
from pytest_trt.monitor.spec import MonitorSpec

PREFIX = "pytest_trt_monitor"
ALERT_NAME = "PytestTrtOutputDrift"
STAT_TEXT = {"max_confidence": "mean max softmax confidence", "entropy": "mean entropy",
             "top2_margin": "mean top-2 margin"}


class Monitored(Protocol):
    """What a collector reads: :class:`~pytest_trt.monitor.runtime.Monitored` (its spec and status)."""

    spec: MonitorSpec

    def status(self) -> Any: ...


def bucket_bounds(top: float) -> list[float]:
    """The upper bounds of the histogram's bins over ``[0, top]`` (the last one is ``top``)."""
    return [top * (i + 1) / HISTOGRAM_BINS for i in range(HISTOGRAM_BINS)]


class MonitorCollector:
    """A ``prometheus_client`` collector: an :class:`~pytest_trt.monitor.runtime.OutputMonitor` read at each scrape."""

    def __init__(self, monitor: Monitored) -> None:
        self.monitor = monitor

    def describe(self) -> Iterator[Any]:
        """The metric names, so that a registry refuses a second monitor's (their series would clash)."""
        return self._families(None)

    def collect(self) -> Iterator[Any]:
        return self._families(self.monitor.status())

    def _families(self, status: Any) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        spec = self.monitor.spec
        labels = ["config", "output"]
        hists = {k: HistogramMetricFamily(f"{PREFIX}_{k}", f"per-sample {STAT_TEXT[k][5:]} of the served outputs",
                                          labels=labels) for k in STATS}
        drift = GaugeMetricFamily(f"{PREFIX}_drift_sd", "last judged window's signed drift from the golden, in SDs",
                                  labels=[*labels, "stat"])
        alert = GaugeMetricFamily(f"{PREFIX}_alert", "1 while the monitor's alert is raised", labels=labels)
        windows = CounterMetricFamily(f"{PREFIX}_windows", "windows judged", labels=labels)
        nonfinite = CounterMetricFamily(f"{PREFIX}_nonfinite", "samples with NaN/Inf scores", labels=labels)
        for o in () if status is None else status.outputs:
            values = [status.config, o.output]
            ref = spec.outputs[o.output]
            for s in o.stats:
                counts = o.histograms[s.stat]
                cumulative, buckets = 0, []
                for bound, c in zip(bucket_bounds(ref.stats[s.stat].top), counts, strict=True):
                    cumulative += c
                    buckets.append((repr(bound), cumulative))
                buckets[-1] = ("+Inf", cumulative)
                hists[s.stat].add_metric(values, buckets, s.total)
                drift.add_metric([*values, s.stat], math.nan if s.drift_sd is None else s.drift_sd)
            alert.add_metric(values, 1.0 if o.alert else 0.0)
            windows.add_metric(values, o.windows)
            nonfinite.add_metric(values, o.nonfinite)
        yield from hists.values()
        yield from (drift, alert, windows, nonfinite)
        info = GaugeMetricFamily(f"{PREFIX}_spec_info", "the monitor spec in use",
                                 labels=["config", "spec_sha256", "golden_sha256", "golden_generation"])
        if status is not None:
            info.add_metric([status.config, status.spec_sha256, str(spec.golden.get("sha256", "")),
                             str(spec.golden.get("generation", ""))], 1.0)
        yield info


def register(monitor: Monitored, registry: Any = None) -> MonitorCollector:
    """Register a :class:`MonitorCollector` of ``monitor`` in ``registry`` (``prometheus_client.REGISTRY`` when
    None)."""
    try:
        import prometheus_client
    except ImportError:
        raise MonitorError("export_prometheus needs prometheus_client: pip install 'pytest-trt[monitor]'") from None
    collector = MonitorCollector(monitor)
    try:
        (prometheus_client.REGISTRY if registry is None else registry).register(collector)
    except ValueError as exc:
        raise MonitorError(f"export_prometheus: the registry already holds these metrics ({exc}); one registry "
                           "exports one monitor: give a monitor whose spec lists every output, or pass another "
                           "prometheus_client.CollectorRegistry") from None
    return collector


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is one)."""
    return json.dumps(text)


def _selector(spec: MonitorSpec, output: str, extra: str) -> str:
    sel = f'config={_q(spec.config)},output={_q(output)}'
    return f"{{{sel}{',' + extra if extra else ''}}}"


def drift_expr(spec: MonitorSpec, output: str, stat: str, range_: str, matchers: str = "") -> str:
    """PromQL of ``stat``'s absolute drift over the last ``range_``, in the SD of one window (the runtime's unit).

    The range's mean holds as many samples as the traffic gave, usually more than a window: it is judged in
    the SD of a ``window``-sample mean, so a busy service alerts no more readily than a quiet one.
    """
    ref = spec.outputs[output]
    s = ref.stats[stat]
    sel = _selector(spec, output, matchers)
    unit = s.unit(ref.samples, spec.policy.window)
    return (f"abs(increase({PREFIX}_{stat}_sum{sel}[{range_}]) / increase({PREFIX}_{stat}_count{sel}[{range_}])"
            f" - {s.mean!r}) / {unit!r}")


def alert_rules(spec: MonitorSpec, *, range_: str = "30m", for_: str = "10m", keep_firing_for: str = "30m",
                matchers: str = "", severity: str = "page") -> str:
    """A Prometheus rule file (YAML): one alert per output and statistic, with the spec's numbers."""
    p = spec.policy
    lines = ["# Written by `pytest-trt monitor rules` from a monitor spec; regenerate it, do not edit it.",
             f"# spec sha256 {spec.sha256}, golden {spec.golden.get('file', '?')} generation "
             f"{spec.golden.get('generation', '?')} (sha256 {spec.golden.get('sha256', '?')})",
             "groups:", f"  - name: {_q('pytest-trt monitor ' + spec.config)}", "    rules:"]
    for output in sorted(spec.outputs):
        sel = _selector(spec, output, matchers)
        for stat in STATS:
            count = f"increase({PREFIX}_{stat}_count{sel}[{range_}])"
            expr = f"{drift_expr(spec, output, stat, range_, matchers)} > {p.alert_sd!r} and {count} >= {p.window}"
            s = spec.outputs[output].stats[stat]
            lines += [
                f"      - alert: {ALERT_NAME}",
                f"        expr: {_q(expr)}",
                f"        for: {for_}",
                f"        keep_firing_for: {keep_firing_for}",
                "        labels:",
                f"          severity: {_q(severity)}",
                f"          config: {_q(spec.config)}",
                f"          output: {_q(output)}",
                f"          stat: {stat}",
                f"          spec_sha256: {_q(spec.sha256)}",
                "        annotations:",
                f"          summary: {_q(f'{spec.config} {output}: {STAT_TEXT[stat]} moved from the golden')}",
                "          description: " + _q(
                    f"{STAT_TEXT[stat]} of {output} over the last {range_} is {{{{ $value | printf \"%.1f\" }}}} SD "
                    f"from the golden's {s.mean:.6g} (alert above {p.alert_sd:g} SD, at least {p.window} samples; "
                    f"golden generation {spec.golden.get('generation', '?')})"),
            ]
    return "\n".join(lines) + "\n"
