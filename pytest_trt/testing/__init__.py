"""Helpers for testing code that uses pytest-trt: pytest-trt's own tests use them, and so can yours.

* :class:`FakeBackend` (``--trt-backend fake`` once registered): a **test double** for tests of the
  plugin's plumbing (options, cache, sessions, summaries, bundles).  It builds nothing: its "engine"
  is the ONNX file's bytes, its log says it is the fake backend, and it runs the model with ONNX's
  pure-numpy reference evaluator.  It never claims to be TensorRT (``BuildResult.backend == "fake"``);
  a test that claims to test builds uses a real backend.  ``FakeBackend().engine(config)`` gives an
  engine without provider or cache (a conftest's own ``trt_engine``).
* :func:`fake_backend` registers it for a block; ``-p pytest_trt.testing.register_fake`` registers it
  in a pytest run (a ``pytester`` subprocess or your own ``pytest`` command).
* :class:`SpyBackend` wraps a real backend and counts its calls (validate, build, record).
* :func:`write_classifier` writes a tiny seeded ONNX classifier (``scale`` makes the "changed model").
* :class:`GoldenLifecycle` runs the golden lifecycle in a ``pytester`` project (no golden -> the
  printed command -> pass -> regression) and asserts each step's outcome with a clear message.

Nothing here imports a backend library, h5py or onnx when imported; the plugin never loads this package.
"""

from __future__ import annotations

from pytest_trt.testing.fake_backend import FAKE, FAKE_SPEC, FakeBackend, fake_backend
from pytest_trt.testing.lifecycle import GoldenLifecycle
from pytest_trt.testing.models import write_classifier
from pytest_trt.testing.spy import SpyBackend

__all__ = ["FAKE", "FAKE_SPEC", "FakeBackend", "GoldenLifecycle", "SpyBackend", "fake_backend", "write_classifier"]
