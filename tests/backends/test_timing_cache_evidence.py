"""The timing cache a TensorRT build starts from is evidence: its sha256 is read from the bytes the builder config is
given (``build.json`` ``extra.timing_cache.sha256_before``; ``sha256_after`` from the bytes written back).

Through the real TensorRT-RTX builder config: RTX accepts the timing-cache calls (no-ops since 1.2, so the backend
refuses the field before a build), which is enough to check what ``configure`` hashes. The expected digests are
hashlib's over the file's bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_trt import BuildConfig, Profile
from tests.conftest import needs_rtx

if TYPE_CHECKING:
    from pytest_trt.backends.trt_apply import Configured

pytestmark = [needs_rtx, pytest.mark.filterwarnings("ignore:.*Timing cache operations are no-ops:DeprecationWarning")]


def _configure(onnx: Path, timing_cache: Path | None) -> tuple[Configured, BuildConfig]:
    import tensorrt_rtx as trt

    from pytest_trt.backends.trt_apply import configure
    from pytest_trt.backends.trt_features import probe

    f = probe(trt)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(onnx.read_bytes())
    config = BuildConfig(name="cbr", onnx=onnx, timing_cache=timing_cache,
                         profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])
    configured = configure(trt, f, builder, network, config, tuple(sorted(f.precision_flags[config.precision])))
    return configured, config


def test_the_timing_cache_bytes_the_build_starts_from_are_hashed(models: dict[str, Path], tmp_path: Path) -> None:
    import tensorrt_rtx as trt

    builder = trt.Builder(trt.Logger(trt.Logger.WARNING))
    timings = bytes(memoryview(builder.create_builder_config().create_timing_cache(b"").serialize()))
    cache = tmp_path / "trt.cache"
    cache.write_bytes(timings)
    configured, _ = _configure(models["conv_bn_relu"], cache)
    assert configured.timing_cache is not None
    assert configured.timing_cache_sha256 == hashlib.sha256(timings).hexdigest()


@pytest.mark.parametrize("pinned", [True, False], ids=["file-not-yet-written", "no-timing-cache"])
def test_no_file_means_no_digest(models: dict[str, Path], tmp_path: Path, pinned: bool) -> None:
    configured, config = _configure(models["conv_bn_relu"], tmp_path / "trt.cache" if pinned else None)
    assert configured.timing_cache_sha256 is None
    assert configured.effective["timing_cache"] is pinned
    assert config.config_hash != config.replace(timing_cache=None if pinned else tmp_path / "t").config_hash
