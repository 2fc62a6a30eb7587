"""Typed build provenance: every backend fills BuildResult.backend and .backend_version.

The TensorRT result is made by the same call the TensorRT backend makes after a build
(``BuildResult.built_for`` its request), so its provenance mapping is tested here without TensorRT.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_trt.artifact import BuildResult
from pytest_trt.audit.bundle import backend_version as bundle_backend_version
from pytest_trt.backends.request import BuildRequest
from pytest_trt.config import BuildConfig, Profile
from pytest_trt.golden import provenance

TRT_VERSION = "10.13.0.35"  # the string tensorrt.__version__ holds for TensorRT 10.13 GA


@pytest.fixture
def config(tmp_path: Path) -> BuildConfig:
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(b"not parsed here: only hashed")
    return BuildConfig(name="m", onnx=onnx_path, profiles=(Profile(x=((1, 4), (2, 4), (4, 4))),))


def _request(config: BuildConfig, backend: str, versions: dict[str, str]) -> BuildRequest:
    sha = config.onnx_sha256
    return BuildRequest(config=config, backend=backend, onnx_sha256=sha, config_hash=config.hash_with(sha, None),
                        versions=versions, device={"kind": "gpu", "name": "NVIDIA H200"}, key="k" * 64)


def _trt_result(config: BuildConfig, backend: str = "tensorrt", module: str = "tensorrt") -> BuildResult:
    request = _request(config, backend, {"backend": TRT_VERSION, module: TRT_VERSION, "onnx": "1.17.0",
                                         "python": "3.11.7"})
    return BuildResult.built_for(request, engine=b"plan", effective={}, durations={"parse": 0.1, "build": 1.0},
                                 versions={**request.versions, "onnx_parser": "10.13.0"})


class _Engine:
    def __init__(self, result: BuildResult) -> None:
        self.result = result
        self.backend_name = result.backend


def test_tensorrt_result_carries_name_and_version(config: BuildConfig) -> None:
    result = _trt_result(config)
    assert (result.backend, result.backend_version) == ("tensorrt", "10.13.0.35")
    assert result.versions["onnx_parser"] == "10.13.0"
    prov = provenance.from_engine(_Engine(result), dataset_sha256="d" * 64, cwd=None)
    assert (prov.backend, prov.backend_version) == ("tensorrt", "10.13.0.35")
    assert bundle_backend_version(result) == "10.13.0.35"


def test_a_tensorrt_upgrade_is_a_provenance_change(config: BuildConfig) -> None:
    old = provenance.from_engine(_Engine(_trt_result(config)), dataset_sha256="d" * 64, cwd=None)
    newer = BuildResult.built_for(_request(config, "tensorrt", {"backend": "10.14.1.48"}), engine=b"plan",
                                  effective={}, durations={})
    new = provenance.from_engine(_Engine(newer), dataset_sha256="d" * 64, cwd=None)
    assert old.tainted_fields(new) == ("backend_version",)


def test_round_trip_and_entries_written_before_the_field(config: BuildConfig, tmp_path: Path) -> None:
    result = _trt_result(config, backend="tensorrt-rtx", module="tensorrt_rtx")
    folder = tmp_path / "entry"
    result.write(folder)
    assert BuildResult.read(folder).backend_version == "10.13.0.35"
    # a cache entry of the previous release: versions["backend"] held the name, no backend_version key
    import json

    build = json.loads((folder / "build.json").read_text())
    del build["backend_version"]
    build["versions"] = {"backend": "tensorrt-rtx", "tensorrt_rtx": "1.7.1.116"}
    (folder / "build.json").write_text(json.dumps(build))
    old = BuildResult.read(folder)
    assert (old.backend, old.backend_version) == ("tensorrt-rtx", "1.7.1.116")


def test_onnxruntime_build_fills_the_version(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    from pytest_trt.backends.onnxruntime import OrtBackend

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    result = OrtBackend().build_config(BuildConfig(name="tiny", onnx=path, profiles=(Profile(x=((1, 8), (4, 8), (4, 8))),)))
    assert (result.backend, result.backend_version) == ("onnxruntime", ort.__version__)
