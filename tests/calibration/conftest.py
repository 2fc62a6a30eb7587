"""Fixtures of the calibration tests: the incident's digits model, its configs, and one shared calibration store.

Entropy calibration (TensorRT's 2048-bin KL search, run by ONNX Runtime's calibrator) takes tens of seconds on
this model, so every test and every pytester run of the session shares one store: each configuration is
calibrated once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_trt.calibration.store import set_store_root


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An engine cache folder; its ``calibration`` subfolder is the calibration store of every test here."""
    return tmp_path_factory.mktemp("calib-cache")


@pytest.fixture(autouse=True)
def _calibration_store(shared_cache_dir: Path) -> Iterator[Path]:
    store = shared_cache_dir / "calibration"
    set_store_root(store)
    yield store
    set_store_root(None)


@pytest.fixture(scope="session")
def calib_npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from examples.calibration.incident import write_calibration_set

    return write_calibration_set(tmp_path_factory.mktemp("calib-data") / "calibration.npz")


@pytest.fixture(scope="session")
def incident_configs(calib_npz: Path):  # type: ignore[no-untyped-def]
    from examples.calibration.incident import configs

    return configs(calib_npz)


@pytest.fixture(scope="session")
def method_config(incident_configs):  # type: ignore[no-untyped-def]
    """config(algorithm): the incident's config with another explicit method."""
    import dataclasses

    approved, _ = incident_configs

    def make(algorithm: str, **changes):  # type: ignore[no-untyped-def]
        calib = dataclasses.replace(approved.calibration, algorithm=algorithm, **changes)
        return approved.replace(calibration=calib)

    return make


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Copies of the real TensorRT logs and calibration caches."""
    return Path(__file__).resolve().parents[1] / "data" / "trt_logs"
