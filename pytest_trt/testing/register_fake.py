"""``pytest -p pytest_trt.testing.register_fake --trt-backend fake``: the fake backend in a pytest run.

Loaded with ``-p`` (or ``addopts = -p pytest_trt.testing.register_fake`` in the ini file), it registers
:data:`~pytest_trt.testing.fake_backend.FAKE_SPEC` before pytest-trt declares ``--trt-backend``, so
``fake`` is one of its choices, and removes it when the run ends (in-process ``pytester`` runs).
``--trt-backend``'s choices are fixed when pytest-trt's option table is first imported, so in a
``pytester`` test run it in a subprocess (``runpytest_subprocess``, ``GoldenLifecycle(subprocess=True)``).
A test double: see :class:`~pytest_trt.testing.fake_backend.FakeBackend`.
"""

from __future__ import annotations

import pytest

from pytest_trt.backends import registry
from pytest_trt.testing.fake_backend import FAKE, FAKE_SPEC


def _register() -> bool:
    """Register the row; whether it was not there before."""
    added = registry.find(FAKE) is None
    registry.register(FAKE_SPEC)
    return added


#: registered by this module (and so removed at the end of the run), not by someone before it
_added = _register()  # at import: before the pytest-trt plugin (an entry point) declares its options


def pytest_addoption(parser: pytest.Parser) -> None:
    """Again for each run of one process (pytester's in-process runs import this module once)."""
    global _added
    _added = _register() or _added


def pytest_unconfigure(config: pytest.Config) -> None:
    global _added
    if _added:
        registry.unregister(FAKE)
        _added = False
