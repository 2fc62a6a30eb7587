"""The build request: a cache-miss build validates once, hashes the ONNX once, probes the device once;
a cache hit validates nothing and imports no TensorRT-RTX (real TensorRT-RTX builds)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.backends.request import BuildRequest, as_request
from pytest_trt.common import filehash, hostprobe
from pytest_trt.engines.provider import EngineProvider
from pytest_trt.testing import SpyBackend
from tests.conftest import needs_ort, needs_rtx

DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))
ROOT = Path(__file__).resolve().parents[2]


class CountingMemo(dict[Any, str]):
    """Stands in for the ONNX hash memo: every real hashing stores one digest."""

    stores: list[str]

    def __setitem__(self, key: Any, value: str) -> None:
        self.stores.append(key[0])
        super().__setitem__(key, value)


@pytest.fixture
def config(models: dict[str, Path]) -> BuildConfig:
    return BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])


@needs_rtx
def test_a_cache_miss_validates_hashes_and_probes_once(
    tmp_path: Path, config: BuildConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo = CountingMemo()
    memo.stores = []
    monkeypatch.setattr(filehash, "_SHA256_MEMO", memo)
    probes: list[tuple[str, ...]] = []
    real_run = hostprobe._run
    monkeypatch.setattr(hostprobe, "_run", lambda *cmd: probes.append(cmd) or real_run(*cmd))
    hostprobe.clear()
    from pytest_trt.backends.tensorrt import TensorRTBackend

    backend = SpyBackend(TensorRTBackend("tensorrt_rtx"))  # the real backend, counting validations and builds
    provider = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", build=True, backend=backend)  # type: ignore[arg-type]
    engine = provider.get(config)
    assert not provider.flush() and not engine.cached
    assert backend.validations == 1
    assert memo.stores == [str(config.onnx.resolve())]  # hashed once: key, request, result and config hash
    assert [cmd[0] for cmd in probes] == ["nvidia-smi"]  # one device probe
    (request,) = backend.built
    assert isinstance(request, BuildRequest) and request.config is config and request.backend == "tensorrt-rtx"
    assert engine.result.onnx_sha256 == request.onnx_sha256 == config.onnx_sha256
    assert engine.result.config_hash == request.config_hash == config.config_hash
    assert engine.result.device == dict(request.device)
    assert {k: v for k, v in engine.result.versions.items() if k != "onnx_parser"} == dict(request.versions)
    assert engine.artifact_dir is not None and engine.artifact_dir.name == request.key

    again = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", backend=backend)  # type: ignore[arg-type]
    assert again.get(config).cached
    assert backend.validations == 1 and len(backend.built) == 1  # a hit: no validation, no build
    assert memo.stores == [str(config.onnx.resolve())] and len(probes) == 1


class CountingHashlib:
    """Stands in for ``hashlib`` in the artifact module: records the size of everything hashed."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def sha256(self, data: bytes = b"") -> Any:
        import hashlib

        self.sizes.append(len(data))
        return hashlib.sha256(data)


@needs_rtx
def test_the_engine_is_hashed_once_per_write_and_once_per_hit(
    tmp_path: Path, config: BuildConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_trt.artifact
    import pytest_trt.common.filehash

    counter = CountingHashlib()
    for module in (pytest_trt.artifact, pytest_trt.common.filehash):  # the cache hashes through both
        monkeypatch.setattr(module, "hashlib", counter)
    provider = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", build=True)
    engine = provider.get(config)
    assert not provider.flush()
    size = len(engine.result.engine)
    assert engine.result.engine_sha256  # the writer's digest, kept
    assert counter.sizes.count(size) == 1
    hit = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache").get(config)
    assert hit.cached and hit.result.engine_sha256 == engine.result.engine_sha256
    assert counter.sizes.count(size) == 2  # read, checked against entry.json and kept: one hash


@needs_rtx
def test_an_unsupported_option_is_reported_before_not_built(tmp_path: Path, config: BuildConfig) -> None:
    from pytest_trt.errors import UnsupportedOption

    provider = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", build=False)
    with pytest.raises(UnsupportedOption, match="timing_cache"):
        provider.get(config.replace(timing_cache=tmp_path / "t.cache"))


@needs_rtx
def test_a_cache_hit_imports_no_tensorrt_rtx(tmp_path: Path, config: BuildConfig) -> None:
    cache = tmp_path / "cache"
    provider = EngineProvider("tensorrt-rtx", cache_dir=cache, build=True)
    provider.get(config)
    assert not provider.flush()
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from pytest_trt import BuildConfig, Profile
        from pytest_trt.engines.provider import EngineProvider
        config = BuildConfig(name="cbr", onnx=Path({str(config.onnx)!r}),
                             profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])
        engine = EngineProvider("tensorrt-rtx", cache_dir=Path({str(cache)!r})).get(config)
        print(engine.cached, "tensorrt_rtx" in sys.modules, engine.result.backend_version)
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    import importlib.metadata

    assert out.stdout.split() == ["True", "False", importlib.metadata.version("tensorrt-rtx")]


@needs_ort
@needs_rtx
def test_a_request_belongs_to_the_backend_that_made_it(config: BuildConfig) -> None:
    from pytest_trt.backends.onnxruntime import OrtBackend
    from pytest_trt.backends.tensorrt import TensorRTBackend

    rtx = TensorRTBackend("tensorrt_rtx")
    request = BuildRequest.create(rtx, config)
    assert as_request(rtx, request) is request
    with pytest.raises(ValueError, match="a build request for backend 'tensorrt-rtx' was given to 'onnxruntime'"):
        OrtBackend().build(request)
    assert as_request(rtx, config) == request  # a bare config is made into the same request
