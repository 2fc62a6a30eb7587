"""Fixtures of the catalog tests: bundles written from real TensorRT-RTX and ONNX Runtime builds."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import HAS_ORT, HAS_RTX

#: what the calibration section of a config looks like (BuildConfig.to_json of Calibration(algorithm="minmax"))
MINMAX = {"algorithm": "minmax", "data": "calib/*.npy", "cache": "calib/int8.cache", "batch_size": 8}
CACHE = b"TRT-8601-MinMaxCalibration\ninput: 3c010a14\n"


def set_created(path: Path, iso: str) -> None:
    """Give a bundle the creation time ``iso`` (``2026-03-01T00:00:00Z``): the catalog reads the file's mtime."""
    from datetime import datetime

    ts = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    os.utime(path, (ts, ts))


@pytest.fixture(scope="session")
def rtx_result() -> Any:
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed (pip install 'pytest-trt[rtx]')")
    from tests.audit.rtx_build import build_mobilenet

    return build_mobilenet(name="mnv2", version="1.0")


@pytest.fixture(scope="session")
def ort_result(models: dict[str, Path]) -> Any:
    if not HAS_ORT:
        pytest.skip("onnxruntime is not installed (pip install 'pytest-trt[ort]')")
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.config import BuildConfig

    return OrtBackend().build_config(BuildConfig(name="cbr", version="2.1", onnx=models["conv_bn_relu"]))


@pytest.fixture(scope="session")
def environment() -> dict[str, Any]:
    from pytest_trt.audit.environment import capture_environment

    return capture_environment(backend=None, rootdir=None)


BundleWriter = Callable[..., Path]


@pytest.fixture(scope="session")
def write(environment: dict[str, Any]) -> BundleWriter:
    """``write(result, folder, golden=..., version=..., calibration=False, name=...)`` -> bundle path."""
    from pytest_trt.audit.bundle import write_bundle
    from pytest_trt.buildlog.readers import parse_entries

    records: dict[int, Any] = {}

    def run(result: Any, folder: Path, *, golden: dict[str, Any] | None = None, version: str | None = None,
            calibration: bool = False, name: str | None = None, env: dict[str, Any] | None = None,
            sign_key: Path | None = None) -> Path:
        config = dict(result.config)
        if version is not None:
            config["version"] = version
        if calibration:
            config["calibration"] = MINMAX
        if config != result.config:
            result = dataclasses.replace(result, config=config)
        if result.backend == "tensorrt-rtx" and id(result.log) not in records:
            records[id(result.log)] = parse_entries(result.log)
        info = write_bundle(result, folder, record=records.get(id(result.log)), environment=env or environment,
                            golden_results=golden, calibration_cache=CACHE if calibration else None,
                            name=name, sign_key=sign_key)
        return info.path

    return run


def verdict(result: Any, verdict: str, **extra: Any) -> dict[str, Any]:
    """A golden verdict as GoldenCheck reports it to the audit layer."""
    return {"config_hash": result.config_hash, "verdict": verdict, "message": None, **extra}
