"""The golden's output distribution watched after release (gray rollout), inside the serving process.

``spec`` (the reference a golden gives: JSON with its own sha256, numpy-free), ``runtime``
(:class:`OutputMonitor`: streaming statistics, drift and the alert), ``prometheus`` (the metrics for
``prometheus_client`` and the alert rule file).  Importing this package imports numpy and the standard library
only: no pytest, h5py, onnxruntime or tensorrt.  Writing a spec from a golden file is the command line's job
(:mod:`pytest_trt.monitor.cli`).
"""

from __future__ import annotations

from pytest_trt.monitor.runtime import MonitorStatus, OutputMonitor, OutputStatus, StatStatus
from pytest_trt.monitor.spec import MonitorSpec, Policy, load_spec

__all__ = ["MonitorSpec", "MonitorStatus", "OutputMonitor", "OutputStatus", "Policy", "StatStatus", "load_spec"]
