"""Repository-level pytest configuration for pytest-trt's own tests and examples."""

from __future__ import annotations

import os

try:  # hypothesis is a test dependency; the examples run without it
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - only without the [test] extra
    settings = None

if settings is not None:
    # "ci" keeps property tests quick and deterministic on the 2-core CI machines;
    # HYPOTHESIS_PROFILE=dev explores more.
    settings.register_profile(
        "ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.register_profile("dev", max_examples=500, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
