"""The golden's output distribution watched after release (gray rollout), inside the serving process.

``spec`` (the reference a golden gives: JSON with its own sha256, numpy-free), ``runtime``
(:class:`OutputMonitor`: streaming statistics, drift and the alert), ``prometheus`` (the metrics for
``prometheus_client`` and the alert rule file).  Its names import numpy and the standard library only (when
first used): no pytest, h5py, onnxruntime or tensorrt.  Writing a spec from a golden file is the command line's job
(:mod:`pytest_trt.monitor.cli`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_trt.common.package import lazy_attribute

if TYPE_CHECKING:
    from pytest_trt.monitor.runtime import MonitorStatus, OutputMonitor, OutputStatus, StatStatus
    from pytest_trt.monitor.spec import MonitorSpec, Policy, load_spec

#: name -> module: resolved on first use, so ``pytest-trt``'s command line (which imports ``monitor.cli``) does
#: not import numpy to print its help
_EXPORTS = {name: "pytest_trt.monitor.runtime" for name in ("MonitorStatus", "OutputMonitor", "OutputStatus",
                                                             "StatStatus")}
_EXPORTS.update({name: "pytest_trt.monitor.spec" for name in ("MonitorSpec", "Policy", "load_spec")})
__all__ = ["MonitorSpec", "MonitorStatus", "OutputMonitor", "OutputStatus", "Policy", "StatStatus", "load_spec"]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _EXPORTS, name)
