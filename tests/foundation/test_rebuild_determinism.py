"""A rebuild (--trt-rebuild) that gives another engine for the same pinned config: reported beside the build (a report
section and the terminal summary, also from pytest-xdist workers), or failed under ini
``trt_require_deterministic_build = true`` with the cache entry put back as it was.

The drifting backend is ONNX Runtime whose saved model carries the environment's ``DRIFT`` in its ``doc_string``:
other bytes, the same graph, as a builder whose engine embeds a timestamp gives. The expected sha256 values are
computed here from the cache's ``engine.plan`` files. Real TensorRT-RTX builds: a rebuild whose builder is given a changed
model, and MobileNetV2 rebuilt twice (TensorRT-RTX 1.7 has given other bytes for that pin).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needs_rtx

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

CONFTEST = """
import dataclasses, os
import onnx
from pytest_trt.backends.onnxruntime import OrtBackend

_build = OrtBackend.build

def build(self, request):
    result = _build(self, request)
    model = onnx.load_from_string(result.engine)
    model.doc_string = os.environ.get("DRIFT", "")
    return dataclasses.replace(result, engine=model.SerializeToString())

OrtBackend.build = build
"""

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

CFG = BuildConfig(name="drift", onnx={onnx!r}, profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.engine
"""


def _project(tmp_path: Path, onnx: Path, ini: str = "") -> Path:
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_d.py").write_text(SUITE.format(onnx=str(onnx)), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}", encoding="utf-8")
    return tmp_path


def _pytest(project: Path, drift: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DRIFT": drift}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                           "-rA", "--trt-backend", "onnxruntime", "--trt-engine-build", "--trt-cache-dir=cache", *args],
                          cwd=project, capture_output=True, text=True, timeout=300, env=env)


def _engine_sha256(project: Path) -> str:
    [plan] = [p for p in (project / "cache").glob("??/*/engine.plan")]
    return hashlib.sha256(plan.read_bytes()).hexdigest()


def _expected(first: str, second: str, config_hash: str) -> str:
    return (f"rebuild of 'drift' (onnxruntime) gave another engine for the same pinned config (config hash "
            f"{config_hash[:12]}): engine sha256 {first[:12]} -> {second[:12]}; build record diff: same layers and "
            "tactics")


def _config_hash(project: Path) -> str:
    import json

    [build] = list((project / "cache").glob("??/*/build.json"))
    return str(json.loads(build.read_text(encoding="utf-8"))["config_hash"])


@pytest.mark.parametrize("xdist", [False, True], ids=["serial", "xdist-1"])
def test_a_rebuild_that_gives_another_engine_is_reported(tmp_path: Path, models: dict[str, Path], xdist: bool) -> None:
    project = _project(tmp_path, models["conv_bn_relu"])
    assert _pytest(project, "a").returncode == 0
    first = _engine_sha256(project)
    again = _pytest(project, "b", "--trt-rebuild", *(("-n", "1") if xdist else ()))
    assert again.returncode == 0, again.stdout[-3000:]
    second = _engine_sha256(project)
    assert first != second  # the new entry is in the cache: reported, not refused
    expected = _expected(first, second, _config_hash(project))
    assert "pytest-trt rebuilds that gave another engine" in again.stdout
    assert again.stdout.count(expected) == 2, again.stdout[-3000:]  # the test's section (-rA) and the summary
    assert not (project / "cache" / "replaced").exists() or not any((project / "cache" / "replaced").iterdir())


def test_required_determinism_fails_the_test_and_puts_the_entry_back(tmp_path: Path, models: dict[str, Path]) -> None:
    project = _project(tmp_path, models["conv_bn_relu"], "trt_require_deterministic_build = true\n")
    assert _pytest(project, "a").returncode == 0
    first = _engine_sha256(project)
    config_hash = _config_hash(project)
    again = _pytest(project, "b", "--trt-rebuild")
    assert again.returncode == 1, again.stdout[-3000:]
    assert "FAILED test_d.py::test_engine" in again.stdout
    assert "trt_require_deterministic_build = true requires the same engine" in again.stdout
    # the engine the test built differed from the one now in the cache: the one before the rebuild, whole
    [entry] = list((project / "cache").glob("??/*/"))
    assert _engine_sha256(project) == first and str(entry) in again.stdout.replace("\n", "")
    assert _expected(first, "0" * 12, config_hash).split(" -> ")[0] in again.stdout
    hit = _pytest(project, "c")  # a plain run takes the restored entry: its files match its entry.json
    assert hit.returncode == 0, hit.stdout[-3000:]
    assert _engine_sha256(project) == first


def test_a_deterministic_rebuild_says_nothing(tmp_path: Path, models: dict[str, Path]) -> None:
    project = _project(tmp_path, models["conv_bn_relu"], "trt_require_deterministic_build = true\n")
    assert _pytest(project, "same").returncode == 0
    again = _pytest(project, "same", "--trt-rebuild")
    assert again.returncode == 0, again.stdout[-3000:]
    assert "gave another engine" not in again.stdout


RTX_CONFTEST = """
import os
import tensorrt_rtx as trt

class Parser(trt.OnnxParser):  # the builder is given another model than the pinned one when PARSE_INSTEAD is set
    def parse_from_file(self, path):
        return super().parse_from_file(os.environ.get("PARSE_INSTEAD") or path)

trt.OnnxParser = Parser
"""


@needs_rtx
@pytest.mark.parametrize("required", [False, True], ids=["reported", "required"])
def test_a_real_tensorrt_rtx_rebuild_from_changed_input_is_caught(tmp_path: Path, models: dict[str, Path],
                                                                 required: bool) -> None:
    """Real TensorRT-RTX builds of one pin; the rebuild's parser reads the same graph with one weight doubled (what a
    builder that does not reproduce its input gives): other engine bytes under the same cache key."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(models["conv_bn_relu"]))
    first_weight = model.graph.initializer[0]
    first_weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first_weight) * 2, first_weight.name))
    changed = tmp_path / "changed.onnx"
    onnx.save(model, str(changed))
    project = tmp_path / "p"
    project.mkdir()
    (project / "conftest.py").write_text(RTX_CONFTEST, encoding="utf-8")
    (project / "test_d.py").write_text(SUITE.format(onnx=str(models["conv_bn_relu"])), encoding="utf-8")
    (project / "pytest.ini").write_text("[pytest]\n" + ("trt_require_deterministic_build = true\n" if required else ""),
                                        encoding="utf-8")
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--trt-backend",
            "tensorrt-rtx", "--trt-engine-build", "--trt-cache-dir=cache", "-o", "trt_bundle_engine=false"]
    first = subprocess.run(args, cwd=project, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:]
    before = _engine_sha256(project)
    env = {**os.environ, "PARSE_INSTEAD": str(changed)}
    again = subprocess.run([*args, "--trt-rebuild"], cwd=project, capture_output=True, text=True, timeout=600, env=env)
    line = (f"rebuild of 'drift' (tensorrt-rtx) gave another engine for the same pinned config (config hash "
            f"{_config_hash(project)[:12]}): engine sha256 {before[:12]} -> ")
    assert line in again.stdout, again.stdout[-3000:]
    after = again.stdout.split(line, 1)[1][:12]
    assert after != before[:12]
    if required:
        assert again.returncode == 1 and _engine_sha256(project) == before  # refused, the entry put back
    else:
        assert again.returncode == 0 and _engine_sha256(project)[:12] == after


@needs_rtx
def test_tensorrt_rtx_rebuilds_of_mobilenet_are_reported_exactly_when_the_bytes_differ(tmp_path: Path) -> None:
    """Three real TensorRT-RTX builds of the example MobileNetV2 (1.7 gave other engine bytes for the same pin in one
    rebuild of two, here): each rebuild is reported if and only if its engine.plan hashes differently from the
    previous build's."""
    import shutil

    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "p"
    shutil.copytree(root / "examples", project, ignore=shutil.ignore_patterns("golden", "__pycache__", "trt-*"))
    args = ["-p", "no:cacheprovider", "--trt-backend", "tensorrt-rtx", "--trt-engine-build", "--trt-cache-dir=cache",
            "-o", "trt_bundle_engine=false", "test_mobilenet.py", "-k", "not golden"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=project, capture_output=True, text=True,
                         timeout=600, env=env)  # the examples' conftest imports examples.models
    assert run.returncode == 0, run.stdout[-3000:]

    def shas() -> dict[str, str]:
        return {p.parent.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in (project / "cache").glob("??/*/engine.plan")}

    before = shas()
    for _ in range(2):
        again = subprocess.run([sys.executable, "-m", "pytest", *args, "--trt-rebuild"], cwd=project,
                               capture_output=True, text=True, timeout=600, env=env)
        assert again.returncode == 0, again.stdout[-3000:]
        after = shas()
        changed = {k for k in after if after[k] != before.get(k)}
        for key in after:
            line = f"engine sha256 {before[key][:12]} -> {after[key][:12]}"
            assert (line in again.stdout) == (key in changed), (key, again.stdout[-3000:])
        before = after
