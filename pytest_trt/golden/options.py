"""Command-line option and ini names of the golden workflow, in one numpy-free place.

Used by the hook module, the failure text (the exact update command) and the tests.
"""

from __future__ import annotations

GOLDEN_DIR_OPTION = "--trt-golden-dir"
GOLDEN_DIR_INI = "trt_golden_dir"
GOLDEN_DIR_DEFAULT = "golden"
UPDATE_OPTION = "--trt-update-golden"
APPROVE_OPTION = "--trt-approve"
#: ini key of threshold ``x`` is ``trt_golden_x`` (``trt_golden_l2_delta``, ...)
THRESHOLD_INI_PREFIX = "trt_golden_"
#: owned by the lead's plugin; quoted in the update command
ENGINE_BUILD_OPTION = "--trt-engine-build"
#: user_properties key carrying refreshed-golden summary lines (survives xdist)
REFRESHED_PROPERTY = "trt_golden_refreshed"
FIXTURE = "trt_golden"
ENGINE_FIXTURE = "trt_engine"
MARKER = "trt"
