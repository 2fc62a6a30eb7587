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

_ADDED = pytest.StashKey[bool]()


def _register() -> bool:
    added = registry.find(FAKE) is None
    registry.register(FAKE_SPEC)
    return added


_register()  # at import: before the pytest-trt plugin (an entry point) declares its options


def pytest_addoption(parser: pytest.Parser) -> None:
    """Again for each run of one process (pytester's in-process runs import this module once)."""
    _register()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ADDED] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_ADDED, False):
        registry.unregister(FAKE)
