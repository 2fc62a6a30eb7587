"""Prometheus: the exported metrics, the rule file (promtool), and a real server judging two test services.

The server test starts the Debian package's ``prometheus`` on 127.0.0.1 with a temporary config scraping two
services on 127.0.0.1 every second: one serves the digits min-max engine's outputs (the planted shift), the
other the approved entropy engine's (the same distribution as the golden).  The rule file from
``pytest-trt monitor rules`` must fire for the first and stay silent for the second.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_trt.compare.distribution import STATS
from pytest_trt.errors import MonitorError
from pytest_trt.monitor import MonitorSpec, OutputMonitor, Policy, load_spec
from pytest_trt.monitor.spec import output_reference
from tests.interrupts import spawn, stop
from tests.monitor.conftest import Digits, cli

prometheus_client = pytest.importorskip("prometheus_client", reason="pip install 'pytest-trt[monitor]'")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

#: how long the same-distribution service is watched at least (its 10 s range full for about 10 s)
WATCH_S = 20
NO_SERVER = ("the prometheus binary is not on PATH: install the Debian package (apt-get install prometheus; "
             ".ci/run does it as root)")


def test_exported_metrics_are_the_monitors_state() -> None:
    rng = np.random.default_rng(0)
    spec = MonitorSpec("model", {"logits": output_reference("logits", rng.normal(size=(500, 10)))}, Policy(window=100))
    monitor = OutputMonitor(spec)
    monitor.observe({"logits": rng.normal(size=(250, 10)).astype(np.float32) * 2})
    registry = prometheus_client.CollectorRegistry()
    monitor.export_prometheus(registry)
    text = prometheus_client.generate_latest(registry).decode()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    status = monitor.status().output("logits")
    base = (("config", "model"), ("output", "logits"))
    for st in status.stats:
        name = f"pytest_trt_monitor_{st.stat}"
        assert samples[(f"{name}_count", base)] == 250
        assert samples[(f"{name}_sum", base)] == pytest.approx(st.total, rel=1e-12)
        top = spec.outputs["logits"].stats[st.stat].top
        cumulative = np.cumsum(status.histograms[st.stat])
        for i in (0, 11, 22):
            le = (("config", "model"), ("le", repr(top * (i + 1) / 24)), ("output", "logits"))
            assert samples[(f"{name}_bucket", le)] == cumulative[i]
        assert samples[(f"{name}_bucket", (("config", "model"), ("le", "+Inf"), ("output", "logits")))] == 250
        drift = samples[("pytest_trt_monitor_drift_sd", (*base, ("stat", st.stat)))]
        assert drift == pytest.approx(st.drift_sd, rel=1e-12)
    assert samples[("pytest_trt_monitor_windows_total", base)] == 2
    assert samples[("pytest_trt_monitor_alert", base)] == (1.0 if status.alert else 0.0)
    (info,) = [k for k in samples if k[0] == "pytest_trt_monitor_spec_info"]
    assert ("spec_sha256", spec.sha256) in info[1]


def test_drift_gauge_is_nan_before_the_first_window() -> None:
    spec = MonitorSpec("m", {"logits": output_reference("logits", np.eye(10)[np.arange(100) % 10] * 5)})
    registry = prometheus_client.CollectorRegistry()
    OutputMonitor(spec).export_prometheus(registry)
    value = registry.get_sample_value("pytest_trt_monitor_drift_sd",
                                      {"config": "m", "output": "logits", "stat": "entropy"})
    assert value is not None and math.isnan(value)


def test_a_registry_refuses_a_second_monitor() -> None:
    spec = MonitorSpec("m", {"logits": output_reference("logits", np.eye(10)[np.arange(100) % 10] * 5)})
    registry = prometheus_client.CollectorRegistry()
    OutputMonitor(spec).export_prometheus(registry)
    with pytest.raises(MonitorError, match="one registry exports one monitor"):
        OutputMonitor(spec).export_prometheus(registry)
    OutputMonitor(spec).export_prometheus(prometheus_client.CollectorRegistry())


def test_the_rule_file_is_valid_for_promtool(digits: Digits, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(NO_SERVER.replace("prometheus binary", "promtool binary"))
    rules = tmp_path / "rules.yml"
    made = cli("monitor", "rules", digits.spec, "-o", rules)
    assert made.returncode == 0, made.stderr
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout


def test_the_rules_numbers_with_promtool(tmp_path: Path) -> None:
    """promtool evaluates the generated rules on planted counters: 2.2 SD below the golden fires once it has held
    for 5 minutes (pending, not firing, at 4m), 1.8 SD stays silent, 5 SD on fewer than 1000 samples in the range
    stays silent.  The planted means come from the spec's numbers and the unit's definition, worked out here."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(NO_SERVER.replace("prometheus binary", "promtool binary"))
    rng = np.random.default_rng(0)
    spec = MonitorSpec("c", {"logits": output_reference("logits", rng.normal(size=(2000, 10)) * 2)}, Policy())
    spec_file = tmp_path / "c.monitor.json"
    spec_file.write_text(spec.to_json())
    rules = tmp_path / "rules.yml"
    made = cli("monitor", "rules", spec_file, "-o", rules, "--range", "10m", "--for", "5m", "--keep-firing-for", "1m")
    assert made.returncode == 0, made.stderr
    ref = spec.outputs["logits"]
    series = []
    for instance, drift, per_minute in (("fires", -2.2, 1000), ("near", -1.8, 1000), ("few", -5.0, 50)):
        for stat in STATS:
            s = ref.stats[stat]
            unit = math.sqrt(s.sd**2 + s.sd**2 * ref.samples / 1000)  # the SD of a 1000-sample window's mean
            mean = s.mean + (drift * max(unit, s.floor) if stat == "max_confidence" else 0.0)
            labels = f'config="c",output="logits",instance="{instance}"'
            series += [f"      - series: 'pytest_trt_monitor_{stat}_count{{{labels}}}'\n"
                       f"        values: '0+{per_minute}x40'",
                       f"      - series: 'pytest_trt_monitor_{stat}_sum{{{labels}}}'\n"
                       f"        values: '0+{mean * per_minute!r}x40'"]
    exp = ("          - exp_labels: {alertname: PytestTrtOutputDrift, severity: page, config: c, output: logits, "
           f"stat: max_confidence, instance: fires, spec_sha256: {spec.sha256}}}\n"
           "            exp_annotations:\n"
           f"              summary: {json.dumps('c logits: mean max softmax confidence moved from the golden')}\n"
           "              description: " + json.dumps(
               "mean max softmax confidence of logits over the last 10m is 2.2 SD from the golden's "
               f"{ref.stats['max_confidence'].mean:.6g} (alert above 2 SD, at least 1000 samples; golden generation ?)")
           + "\n")
    test = tmp_path / "test.yml"
    test.write_text(
        f"rule_files: [{json.dumps(str(rules))}]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n"
        "    input_series:\n" + "\n".join(series) + "\n    alert_rule_test:\n"
        "      - eval_time: 4m\n        alertname: PytestTrtOutputDrift\n        exp_alerts: []\n"
        "      - eval_time: 30m\n        alertname: PytestTrtOutputDrift\n        exp_alerts:\n" + exp)
    run = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCESS" in run.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - 127.0.0.1 only
        return json.loads(r.read())


class Service:
    """A test service on 127.0.0.1: a monitor fed batches drawn from ``logits`` 20 times a second."""

    def __init__(self, spec: MonitorSpec, logits: np.ndarray, seed: int) -> None:
        self.monitor = OutputMonitor(spec)
        self.registry = prometheus_client.CollectorRegistry()
        self.monitor.export_prometheus(self.registry)
        self.server, _ = prometheus_client.start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.address = f"127.0.0.1:{self.server.server_port}"
        self._stop = threading.Event()
        rng = np.random.default_rng(seed)
        self._thread = threading.Thread(target=self._feed, args=(logits, rng), daemon=True)
        self._thread.start()

    def _feed(self, logits: np.ndarray, rng: np.random.Generator) -> None:
        while not self._stop.wait(0.05):
            self.monitor.observe({"logits": logits[rng.integers(0, len(logits), 250)]})

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def services(digits: Digits) -> Iterator[tuple[Service, Service]]:
    spec = load_spec(digits.spec)
    shifted = Service(spec, digits.minmax, seed=1)
    try:
        same = Service(spec, digits.entropy, seed=2)
    except BaseException:
        shifted.close()
        raise
    try:
        yield shifted, same
    finally:
        shifted.close()
        same.close()


@pytest.fixture
def prometheus(services: tuple[Service, Service], digits: Digits, tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(NO_SERVER)
    rules = tmp_path / "rules.yml"
    made = cli("monitor", "rules", digits.spec, "-o", rules, "--range", "10s", "--for", "2s",
               "--keep-firing-for", "5s")
    assert made.returncode == 0, made.stderr
    shifted, same = services
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files: [{json.dumps(str(rules))}]\n"
        "scrape_configs:\n  - job_name: service\n    static_configs:\n"
        f"      - targets: [\"{shifted.address}\", \"{same.address}\"]\n")
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = spawn([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
                  f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=2).close()  # noqa: S310
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"prometheus did not start: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield url
    finally:
        stop(proc, grace_s=20)
        log.close()


def test_a_real_prometheus_fires_on_the_shift_and_stays_silent_on_the_same_distribution(
        prometheus: str, services: tuple[Service, Service]) -> None:
    shifted, same = services
    loaded = _get(f"{prometheus}/api/v1/rules")["data"]["groups"][0]["rules"]
    assert [r["labels"]["stat"] for r in loaded] == list(STATS)
    start = time.monotonic()
    deadline, fired, seen_same = start + 90, set(), []
    while time.monotonic() < deadline:
        alerts = _get(f"{prometheus}/api/v1/alerts")["data"]["alerts"]
        fired |= {a["labels"]["stat"] for a in alerts
                  if a["labels"]["instance"] == shifted.address and a["state"] == "firing"}
        seen_same += [a for a in alerts if a["labels"]["instance"] == same.address]
        if fired == set(STATS) and time.monotonic() > start + WATCH_S:
            break
        time.sleep(0.5)
    assert fired == set(STATS), f"only {sorted(fired)} fired for the min-max service"
    # the same-distribution service was scraped and judged all along, with enough samples, and never alerted
    query = urllib.parse.quote(f'increase(pytest_trt_monitor_entropy_count{{instance="{same.address}"}}[10s])')
    (result,) = _get(f"{prometheus}/api/v1/query?query={query}")["data"]["result"]
    assert float(result["value"][1]) >= 1000
    history = urllib.parse.quote(f'count_over_time(ALERTS{{instance="{same.address}"}}[5m])')
    assert _get(f"{prometheus}/api/v1/query?query={history}")["data"]["result"] == []
    assert seen_same == []
    assert same.monitor.status().output("logits").state in ("ok", "warming up")
    assert shifted.monitor.status().output("logits").alert

