"""Command-line option and ini names of the golden workflow, in one numpy-free place.

Used by the hook module, the failure text (the exact update command) and the tests.
"""

from __future__ import annotations

from pytest_trt.options import ENGINE_BUILD as ENGINE_BUILD_OPTION
from pytest_trt.options import MARKER

GOLDEN_DIR_OPTION = "--trt-golden-dir"
GOLDEN_DIR_INI = "trt_golden_dir"
GOLDEN_DIR_DEFAULT = "golden"
UPDATE_OPTION = "--trt-update-golden"
APPROVE_OPTION = "--trt-approve"
APPROVE_REPORT_OPTION = "--trt-approve-report"
#: ini key of threshold ``x`` is ``trt_golden_x`` (``trt_golden_l2_delta``, ...)
THRESHOLD_INI_PREFIX = "trt_golden_"
#: user_properties key carrying refreshed-golden summary lines (survives xdist)
REFRESHED_PROPERTY = "trt_golden_refreshed"
FIXTURE = "trt_golden"
ENGINE_FIXTURE = "trt_engine"

__all__ = [
    "APPROVE_OPTION", "ENGINE_BUILD_OPTION", "ENGINE_FIXTURE", "FIXTURE", "GOLDEN_DIR_DEFAULT", "GOLDEN_DIR_INI",
    "GOLDEN_DIR_OPTION", "MARKER", "REFRESHED_PROPERTY", "THRESHOLD_INI_PREFIX", "UPDATE_OPTION",
    "APPROVE_REPORT_OPTION",
]
