"""A rebuild (--trt-rebuild) that gives another engine for the same pinned config: reported, or failed under ini
``trt_require_deterministic_build = true`` with the cache entry left as it was.

The drifting backend is ONNX Runtime whose saved model carries a build counter in its ``doc_string``: other bytes,
the same graph, as a builder whose serialized engine embeds a timestamp would give.  The expected sha256 values
are computed here from the bytes each build returned.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from pytest_trt.config import BuildConfig, Profile  # noqa: E402
from pytest_trt.engines.provider import EngineProvider  # noqa: E402
from pytest_trt.errors import BuildFailed  # noqa: E402


def _model(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(__import__("numpy").eye(4, dtype="float32"), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _drifting() -> Any:
    import dataclasses

    from pytest_trt.backends.registry import create_backend

    backend = create_backend("onnxruntime")
    base = type(backend)

    class Drifting(base):  # type: ignore[misc, valid-type]
        builds = 0

        def build(self, request: Any) -> Any:
            result = super().build(request)
            model = onnx.load_from_string(result.engine)
            Drifting.builds += 1
            model.doc_string = f"build {Drifting.builds}"
            return dataclasses.replace(result, engine=model.SerializeToString())

    backend.__class__ = Drifting
    return backend


@pytest.fixture
def config(tmp_path: Path) -> BuildConfig:
    return BuildConfig(name="drift", onnx=_model(tmp_path / "m.onnx"),
                       profiles=(Profile(x=((1, 4), (2, 4), (8, 4))),))


def _first(cache: Path, config: BuildConfig, backend: Any) -> str:
    provider = EngineProvider("onnxruntime", cache_dir=cache, build=True, backend=backend)
    engine = provider.get(config)
    provider.flush()
    return hashlib.sha256(engine.result.engine).hexdigest()


def test_a_rebuild_that_differs_is_reported(tmp_path: Path, config: BuildConfig) -> None:
    backend = _drifting()
    first = _first(tmp_path / "cache", config, backend)
    provider = EngineProvider("onnxruntime", cache_dir=tmp_path / "cache", build=True, rebuild=True, backend=backend)
    engine = provider.get(config)
    provider.flush()
    second = hashlib.sha256(engine.result.engine).hexdigest()
    assert first != second
    assert provider.nondeterministic == [
        f"rebuild of 'drift' (onnxruntime) gave another engine for the same pinned config (config hash "
        f"{config.config_hash[:12]}): engine sha256 {first[:12]} -> {second[:12]}; build record diff: same layers "
        "and tactics"]


def test_required_determinism_fails_and_keeps_the_entry(tmp_path: Path, config: BuildConfig) -> None:
    backend = _drifting()
    first = _first(tmp_path / "cache", config, backend)
    provider = EngineProvider("onnxruntime", cache_dir=tmp_path / "cache", build=True, rebuild=True, backend=backend,
                              require_deterministic=True)
    with pytest.raises(BuildFailed, match=r"gave another engine .*trt_require_deterministic_build = true"):
        provider.get(config)
    provider.flush()
    again = EngineProvider("onnxruntime", cache_dir=tmp_path / "cache", backend=backend).get(config)
    assert hashlib.sha256(again.result.engine).hexdigest() == first  # the entry was not replaced


def test_a_deterministic_rebuild_says_nothing(tmp_path: Path, config: BuildConfig) -> None:
    from pytest_trt.backends.registry import create_backend

    backend = create_backend("onnxruntime")
    _first(tmp_path / "cache", config, backend)
    provider = EngineProvider("onnxruntime", cache_dir=tmp_path / "cache", build=True, rebuild=True, backend=backend,
                              require_deterministic=True)
    provider.get(config)
    provider.flush()
    assert provider.nondeterministic == []


def test_the_terminal_summary_shows_the_difference() -> None:
    from pytest_trt.pytest_plugin.channel import WorkerOutput
    from pytest_trt.pytest_plugin.terminal import SummaryData, write_summary

    lines: list[tuple[str, dict[str, Any]]] = []

    class Reporter:
        def write_line(self, line: str, **markup: Any) -> None:
            lines.append((line, markup))

        def section(self, title: str) -> None:
            lines.append((f"== {title}", {}))

    out = WorkerOutput(nondeterministic=["rebuild of 'drift' (onnxruntime) gave another engine"])
    received = WorkerOutput.received({"pytest_trt": {"nondeterministic": out.nondeterministic}})  # xdist round trip
    write_summary(Reporter(), SummaryData(output=received))
    assert ("WARNING rebuild of 'drift' (onnxruntime) gave another engine", {"yellow": True}) in lines
