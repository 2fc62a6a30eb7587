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
#: what a provenance difference between golden and engine does: compare (report it) or fail
PROVENANCE_OPTION = "--trt-golden-provenance"
PROVENANCE_INI = "trt_golden_provenance"
#: provenance fields that fail the check even under ``compare`` (e.g. ``device config_hash``)
PROVENANCE_FAIL_ON_INI = "trt_golden_provenance_fail_on"
#: user_properties key carrying provenance notes of passing checks (survives xdist)
NOTE_PROPERTY = "trt_golden_provenance_note"
FIXTURE = "trt_golden"
ENGINE_FIXTURE = "trt_engine"

__all__ = [
    "APPROVE_OPTION", "ENGINE_BUILD_OPTION", "ENGINE_FIXTURE", "FIXTURE", "GOLDEN_DIR_DEFAULT", "GOLDEN_DIR_INI",
    "GOLDEN_DIR_OPTION", "MARKER", "NOTE_PROPERTY", "PROVENANCE_FAIL_ON_INI", "PROVENANCE_INI", "PROVENANCE_OPTION",
    "REFRESHED_PROPERTY", "THRESHOLD_INI_PREFIX", "UPDATE_OPTION", "APPROVE_REPORT_OPTION",
]
