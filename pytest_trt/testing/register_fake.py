"""``pytest -p pytest_trt.testing.register_fake --trt-backend fake``: the fake backend in a pytest run.

Loaded with ``-p``, it registers :data:`~pytest_trt.testing.fake_backend.FAKE_SPEC` before pytest-trt
declares ``--trt-backend``, so ``fake`` is one of its choices.  A test double: see
:class:`~pytest_trt.testing.fake_backend.FakeBackend`.
"""

from __future__ import annotations

from pytest_trt.backends import registry
from pytest_trt.testing.fake_backend import FAKE_SPEC

registry.register(FAKE_SPEC)
