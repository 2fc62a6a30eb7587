"""Fixtures for the golden tests: models, configs, a dataset, GoldenCheck factories."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from golden_engines import CLASSES, FEATURES, write_model

from pytest_trt.config import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import ProvenancePolicy
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "models"
    d.mkdir()
    return d


@pytest.fixture
def make_config(model_dir: Path) -> Callable[..., BuildConfig]:
    def make(name: str = "tiny", *, seed: int = 0, scale: float = 1.0, batch: int = 16) -> BuildConfig:
        onnx_path = write_model(model_dir / f"{name}-{seed}-{scale}.onnx", seed=seed, scale=scale)
        return BuildConfig(name=name, onnx=onnx_path,
                           profiles=(Profile(x=((1, FEATURES), (batch, FEATURES), (batch, FEATURES))),))
    return make


@pytest.fixture
def dataset() -> GoldenDataset:
    rng = np.random.default_rng(42)
    x = rng.standard_normal((100, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, 100)
    tags = tuple("edge" if i % 10 == 0 else ("past-error" if i % 7 == 0 else "") for i in range(100))
    return GoldenDataset.from_arrays({"x": x}, labels=labels, tags=tags)


@pytest.fixture
def golden_dir(tmp_path: Path) -> Path:
    return tmp_path / "golden"


@pytest.fixture
def golden(golden_dir: Path) -> Callable[..., GoldenCheck]:
    """``golden(update=True, approve="why")`` -> a GoldenCheck on ``golden_dir``."""
    def make(*, update: bool = False, approve: str | None = None, provenance: ProvenancePolicy | None = None,
             **kwargs: Any) -> GoldenCheck:
        settings = GoldenSettings(golden_dir=golden_dir, update=update, approve=approve, rootdir=golden_dir.parent,
                                  provenance=provenance or ProvenancePolicy())
        return GoldenCheck(settings, nodeid="tests/test_model.py::test_tiny", **kwargs)
    return make
