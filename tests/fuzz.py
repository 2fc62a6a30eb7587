"""Shared settings of the never-crash fuzz tests.

CI runs ``PYTEST_TRT_FUZZ_EXAMPLES`` examples per test (200 unless set); run a larger count by hand with e.g.
``PYTEST_TRT_FUZZ_EXAMPLES=5000 python -m pytest tests -k fuzz -p no:cacheprovider``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("PYTEST_TRT_FUZZ_EXAMPLES", "200"))

fuzz_settings = settings(
    max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
