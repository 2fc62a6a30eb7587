"""OutputMonitor on planted data: windows, drift figures, the alert's hysteresis, threads, imports, bad input.

Expected figures come from plain float64 numpy in the test (softmax, entropy, margin written out here), not from
the package's vectorized code.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest

from pytest_trt.compare.distribution import STATS
from pytest_trt.errors import MonitorError
from pytest_trt.monitor import MonitorSpec, OutputMonitor, Policy
from pytest_trt.monitor.spec import OutputReference, StatReference, output_reference

C = 10


def softmax_stats(logits: np.ndarray) -> dict[str, np.ndarray]:
    """The three statistics per sample, written out in float64 (the test's own definition)."""
    x = logits.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    s = np.sort(p, axis=1)
    return {"max_confidence": s[:, -1], "entropy": -(p * np.log(p)).sum(axis=1), "top2_margin": s[:, -1] - s[:, -2]}


def logits_of(n: int, seed: int, shift: float = 0.0) -> np.ndarray:
    """Random 10-class logits; ``shift`` lowers the winning class's margin (less confident outputs)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, C)).astype(np.float32)
    x[:, 0] += 3.0 - shift
    return x


def spec_for(golden: np.ndarray, **policy: float) -> MonitorSpec:
    return MonitorSpec("planted", {"logits": output_reference("logits", golden)}, Policy(**policy))  # type: ignore[arg-type]


def fixed_spec(mean: float = 0.5, sd: float = 0.01, samples: int = 100, **policy: float) -> MonitorSpec:
    """A spec with chosen numbers for max_confidence (the other statistics far from anything planted)."""
    stats = {k: StatReference(mean if k == "max_confidence" else 0.0, sd if k == "max_confidence" else 1e6, 1e-3,
                              1.0 if k != "entropy" else float(np.log(C)), (0,) * 24) for k in STATS}
    return MonitorSpec("fixed", {"logits": OutputReference("logits", C, False, samples, stats)},
                       Policy(**policy))  # type: ignore[arg-type]


def probs_with_confidence(conf: float, n: int) -> np.ndarray:
    """Probability rows whose max is ``conf`` (class 0) and whose rest is spread evenly."""
    p = np.full((n, C), (1.0 - conf) / (C - 1), np.float64)
    p[:, 0] = conf
    return p


def test_importing_the_monitor_imports_no_heavy_module() -> None:
    code = ("import sys; import pytest_trt.monitor; "
            "print(sorted(m for m in ('pytest', '_pytest', 'h5py', 'onnxruntime', 'tensorrt', 'tensorrt_rtx', 'onnx',"
            " 'prometheus_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loading_the_plugin_does_not_import_the_monitor() -> None:
    code = "import sys; import pytest_trt.plugin; print(sorted(m for m in sys.modules if 'monitor' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_window_drift_matches_the_definition() -> None:
    golden = logits_of(2000, 0)
    spec = spec_for(golden, window=500)
    ref = spec.outputs["logits"]
    g = softmax_stats(golden)
    for k in STATS:  # the reference is the golden check's: mean over the golden set
        assert ref.stats[k].mean == pytest.approx(float(g[k].mean()), rel=1e-6)
    served = logits_of(1200, 1, shift=0.5)
    mon = OutputMonitor(spec)
    for start in range(0, 1200, 300):  # the 2nd window starts inside the 2nd batch
        mon.observe({"logits": served[start : start + 300]})
    s = mon.status().output("logits")
    assert (s.samples, s.windows, s.window_samples) == (1200, 2, 200)
    w = softmax_stats(served[500:1000])  # the last judged window: samples 500..999
    cur = softmax_stats(served[1000:])
    for st in s.stats:
        r = ref.stats[st.stat]
        unit = max(r.sd * np.sqrt(1 + 2000 / 500), r.floor)
        assert st.window_mean == pytest.approx(float(w[st.stat].mean()), rel=1e-6)
        assert st.drift_sd == pytest.approx((w[st.stat].mean() - r.mean) / unit, rel=1e-5, abs=1e-6)
        unit_cur = max(r.sd * np.sqrt(1 + 2000 / 200), r.floor)
        assert st.current_drift_sd == pytest.approx((cur[st.stat].mean() - r.mean) / unit_cur, rel=1e-5, abs=1e-6)
        # each sample's statistic is float32 arithmetic, within 2e-6 of the float64 form (test_distribution_stats):
        # their sum over n samples is within n * 2e-6 of the float64 sum
        assert st.total == pytest.approx(float(softmax_stats(served)[st.stat].sum()), abs=served.shape[0] * 2e-6)
    # lower confidence: negative confidence and margin drift, positive entropy drift
    d = {st.stat: st.drift_sd for st in s.stats}
    assert d["max_confidence"] < -2 and d["top2_margin"] < -2 and d["entropy"] > 2


def test_histograms_count_every_sample_in_the_golden_bins() -> None:
    served = logits_of(700, 3)
    mon = OutputMonitor(spec_for(logits_of(500, 0), window=100))
    mon.observe(served)
    h = mon.status().output("logits").histograms
    stats = softmax_stats(served)
    for k in STATS:
        top = np.log(C) if k == "entropy" else 1.0
        idx = np.minimum((stats[k] / top * 24).astype(int), 23)
        assert list(h[k]) == np.bincount(idx, minlength=24).tolist()


def test_alert_needs_confirm_windows_and_clears_only_below_clear_sd() -> None:
    # mean 0.5, SD 0.01 over 100 golden samples, windows of 100: unit = 0.01 * sqrt(2)
    mon = OutputMonitor(fixed_spec(window=100, alert_sd=2.0, clear_sd=1.0, confirm=2))
    unit = 0.01 * np.sqrt(2)

    def window(drift: float) -> str:
        mon.observe(probs_with_confidence(0.5 + drift * unit, 100))
        return mon.status().output("logits").state

    assert mon.status().output("logits").state == "warming up"
    mon.observe(probs_with_confidence(0.5 - 20 * unit, 99))  # far off, but the window is not full: nothing judged
    assert mon.status().output("logits").state == "warming up"
    mon.observe(probs_with_confidence(0.5 - 20 * unit, 1))  # the 100th sample closes it at -20 SD
    assert mon.status().output("logits").state == "pending"
    assert mon.status().output("logits").stats[0].drift_sd == pytest.approx(-20, rel=1e-6)
    assert window(0.0) == "ok"  # one breach alone does not alert: the count restarts
    assert window(-2.5) == "pending"
    assert window(-2.5) == "alert"
    assert mon.status().output("logits").first_alert_at == 400
    assert window(-1.5) == "alert"  # between clear_sd and alert_sd: stays raised (hysteresis)
    assert window(1.5) == "alert"
    assert window(-0.5) == "ok"  # below clear_sd: clears
    assert window(-1.5) == "ok"  # between the two: does not raise it again
    assert window(-2.5) == "pending"
    s = mon.status().output("logits")
    assert (s.alerts, s.windows) == (1, 9)


def test_drift_at_the_threshold_does_not_breach() -> None:
    mon = OutputMonitor(fixed_spec(window=100, confirm=1, alert_sd=2.0))
    mon.observe(probs_with_confidence(0.5 + 1.99 * 0.01 * np.sqrt(2), 100))
    assert mon.status().output("logits").state == "ok"
    mon.observe(probs_with_confidence(0.5 + 2.01 * 0.01 * np.sqrt(2), 100))
    assert mon.status().output("logits").state == "alert"


def test_sd_floor_bounds_a_near_constant_output() -> None:
    # golden SD 1e-9: the floor 0.001 is the unit, so a shift of 0.0015 is 1.5 SD, not a million
    mon = OutputMonitor(fixed_spec(sd=1e-9, window=100, confirm=1))
    mon.observe(probs_with_confidence(0.5015, 100))
    (conf,) = [s for s in mon.status().output("logits").stats if s.stat == "max_confidence"]
    assert conf.drift_sd == pytest.approx(1.5, rel=1e-6)
    assert mon.status().output("logits").state == "ok"


def test_eight_threads_give_the_serial_totals() -> None:
    spec = spec_for(logits_of(1000, 0), window=1000)
    batches = [logits_of(256, 100 + i, shift=(i % 3) * 0.3) for i in range(64)]
    serial = OutputMonitor(spec)
    for b in batches:
        serial.observe({"logits": b})
    shared = OutputMonitor(spec)
    start = threading.Barrier(8)

    def feed(part: list[np.ndarray]) -> None:
        start.wait()
        for b in part:
            shared.observe({"logits": b})

    threads = [threading.Thread(target=feed, args=(batches[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a, b = serial.status().output("logits"), shared.status().output("logits")
    assert (b.samples, b.windows, b.window_samples) == (a.samples, a.windows, a.window_samples) == (16384, 16, 384)
    assert b.histograms == a.histograms
    assert sum(b.histograms["entropy"]) == 16384
    for x, y in zip(a.stats, b.stats, strict=True):
        assert y.total == pytest.approx(x.total, rel=1e-12)


def test_state_does_not_grow_with_traffic() -> None:
    import tracemalloc

    mon = OutputMonitor(spec_for(logits_of(500, 0), window=100))
    batch = logits_of(256, 1)
    mon.observe({"logits": batch})
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(200):
        mon.observe({"logits": batch})
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    assert mon.status().output("logits").samples == 201 * 256
    assert grown < 64 * 1024  # 51,200 more samples; a list of them would be 1.2 MB


def test_nonfinite_rows_are_counted_and_kept_out() -> None:
    mon = OutputMonitor(spec_for(logits_of(500, 0), window=100))
    x = logits_of(100, 1)
    x[3, 2] = np.nan
    mon.observe(x)
    s = mon.status().output("logits")
    assert (s.samples, s.nonfinite, s.window_samples) == (99, 1, 99)
    assert all(np.isfinite(st.total) for st in s.stats)


def test_bad_outputs_are_refused_with_the_expected_shape() -> None:
    mon = OutputMonitor(spec_for(logits_of(500, 0)))
    with pytest.raises(MonitorError, match=r"output 'logits': got float32 scores of shape \(4, 7\); .*\(N, 10\)"):
        mon.observe({"logits": np.zeros((4, 7), np.float32)})
    with pytest.raises(MonitorError, match="int64 scores"):
        mon.observe({"logits": np.zeros((4, 10), np.int64)})
    mon.observe({"boxes": np.zeros((4, 4))})  # an output the spec does not monitor is ignored
    assert mon.status().output("logits").samples == 0
