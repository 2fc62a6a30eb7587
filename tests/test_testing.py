"""pytest_trt.testing: the fake backend goes through the real provider, cache and bundle path; the
lifecycle helper passes a sound suite and fails, naming the step, on a broken one.

Expected numbers come from numpy (``relu(x @ W1) @ W2`` recomputed here from the seeded weights)
and from the ONNX file itself, never from the helpers under test.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.backends import registry
from pytest_trt.engines.provider import EngineProvider
from pytest_trt.testing import FAKE, FakeBackend, GoldenLifecycle, SpyBackend, fake_backend, write_classifier

PROFILE = Profile(x=((1, 8), (16, 8), (16, 8)))
FAKE_RUN = ("-p", "pytest_trt.testing.register_fake")
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

SUITE = """
import os
import numpy as np
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.testing import write_classifier

SCALE = float(os.environ.get("TINY_SCALE", "1.0"))
MODEL = write_classifier(f"tiny-{SCALE}.onnx", scale=SCALE)
TINY = BuildConfig(name="tiny", onnx=MODEL, profiles=[Profile(x=((1, 8), (16, 8), (16, 8)))])
DATA = GoldenDataset.from_arrays({"x": np.random.default_rng(0).standard_normal((32, 8)).astype("f4")},
                                 labels=np.arange(32) % 5)

@pytest.mark.trt(TINY)
def test_tiny(trt_engine, trt_golden):
    assert trt_engine.result.backend == "fake"
    trt_golden.check(trt_engine, dataset=DATA, l2_delta=0.05)
"""


def _expected_logits(x: np.ndarray, *, seed: int = 0, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)  # the weights write_classifier documents, drawn independently
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    w2 = (rng.standard_normal((16, 5)) * scale).astype(np.float32)
    return np.maximum(x @ w1, 0) @ w2


def test_fake_build_runs_the_model_and_says_it_is_fake(tmp_path: Path) -> None:
    onnx_path = write_classifier(tmp_path / "m.onnx", names=("a", "b", "c"))
    config = BuildConfig(name="m", onnx=onnx_path, profiles=[PROFILE])
    with fake_backend() as backend:
        provider = EngineProvider(FAKE, cache_dir=tmp_path / "cache", build=True, backend=backend)
        engine = provider.get(config)
        assert provider.flush() == []
        assert engine.result.backend == "fake" and engine.result.engine == onnx_path.read_bytes()
        assert "no TensorRT" in engine.result.log[0].text and "TensorRT" not in engine.result.backend_version
        assert [(layer.name, layer.type) for layer in engine.record.layers] == [
            ("a", "MatMul"), ("b", "Relu"), ("c", "MatMul"), ("argmax", "ArgMax")]
        assert engine.record.fusions == ()
        x = np.random.default_rng(3).standard_normal((20, 8)).astype(np.float32)  # 20 > max 16: split
        out = engine.run({"x": x})
        np.testing.assert_allclose(out["logits"], _expected_logits(x), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(out["pred"], _expected_logits(x).argmax(axis=1))
        again = EngineProvider(FAKE, cache_dir=tmp_path / "cache", backend=backend).get(config)
        assert again.cached and again.result.engine == engine.result.engine  # from the cache entry
        assert again.record.layers == engine.record.layers
    assert registry.find(FAKE) is None  # unregistered after the block


def test_compute_replaces_the_reference_evaluator(tmp_path: Path) -> None:
    config = BuildConfig(name="m", onnx=write_classifier(tmp_path / "m.onnx"), profiles=[PROFILE])
    with fake_backend(compute=lambda feeds: {"logits": feeds["x"] * 2}) as backend:
        engine = EngineProvider(FAKE, cache_dir=tmp_path / "c", build=True, backend=backend).get(config)
        out = engine.run({"x": np.ones((2, 8), np.float32)})
    np.testing.assert_array_equal(out["logits"], np.full((2, 8), 2.0, np.float32))


def test_fake_backend_refuses_calibration_and_bad_onnx(tmp_path: Path) -> None:
    from pytest_trt.errors import BuildFailed

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07junk")
    with fake_backend() as backend, pytest.raises(BuildFailed, match=r"fake backend could not parse .*bad\.onnx"):
        EngineProvider(FAKE, cache_dir=tmp_path / "c", build=True, backend=backend).get(
            BuildConfig(name="bad", onnx=bad))


def test_spy_counts_what_the_provider_asks(tmp_path: Path) -> None:
    config = BuildConfig(name="m", onnx=write_classifier(tmp_path / "m.onnx"), profiles=[PROFILE])
    with fake_backend():
        spy = SpyBackend(FakeBackend())
        first = EngineProvider(FAKE, cache_dir=tmp_path / "c", build=True, backend=spy)  # type: ignore[arg-type]
        first.get(config).record  # noqa: B018 - parsed on first access
        first.flush()
        assert (spy.validations, spy.builds, spy.records) == (1, 1, 1)
        EngineProvider(FAKE, cache_dir=tmp_path / "c", backend=spy).get(config).record  # type: ignore[arg-type]  # noqa: B018
        assert (spy.validations, spy.builds, spy.records) == (1, 1, 1)  # a hit: stored record, nothing rebuilt


def test_a_pytest_run_with_the_fake_backend_makes_a_verifiable_bundle(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tiny=SUITE)
    life = GoldenLifecycle(pytester, "--trt-backend", FAKE, "--trt-engine-build", always=(*FAKE_RUN, *QUIET),
                           golden="golden/tiny.h5", subprocess=True)
    command = life.first_run()
    assert command[:2] == ["test_tiny.py::test_tiny", "--trt-backend"] and command[-1] == "REASON"
    life.approve("fake golden")
    checked = life.check()
    checked.stdout.fnmatch_lines(["tiny v0 *cached*fake *"])  # the second session: from the cache
    (bundle,) = (pytester.path / "trt-bundles").glob("*.tar.gz")
    assert bundle.name.startswith("tiny-v0-fake")
    verified = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "bundle", "verify", str(bundle)],
                              capture_output=True, text=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert verified.stdout.startswith("OK")


def test_lifecycle_sees_a_regression(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_tiny=SUITE)
    life = GoldenLifecycle(pytester, "--trt-backend", FAKE, "--trt-engine-build", always=(*FAKE_RUN, *QUIET),
                           subprocess=True)
    life.first_run()
    life.approve("fake golden")
    monkeypatch.setenv("TINY_SCALE", "1.18")
    life.regression("*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*")
    with pytest.raises(pytest.fail.Exception, match=r"step 'check'.*expected passing tests only, got 1 failed"):
        life.check()


BROKEN = """
import pytest
from test_tiny import TINY

@pytest.mark.trt(TINY)
def test_tiny(trt_engine, trt_golden):
    pass  # the golden check is never called
"""


def test_lifecycle_fails_clearly_when_the_golden_check_is_broken(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tiny=SUITE.replace("def test_tiny", "def _unused"), test_broken=BROKEN)
    life = GoldenLifecycle(pytester, "--trt-backend", FAKE, "--trt-engine-build", always=(*FAKE_RUN, *QUIET),
                           subprocess=True)
    with pytest.raises(pytest.fail.Exception) as failed:
        life.first_run()
    text = str(failed.value)
    assert "golden lifecycle, step 'first run (no golden yet)'" in text
    assert "expected a failing test, got 1 passed" in text
    assert "is a golden already there, or is the check not run?" in text
    with pytest.raises(ValueError, match=r"call first_run\(\) first"):
        life.approve("why")


def test_lifecycle_fails_when_approval_does_not_write(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tiny=SUITE)
    life = GoldenLifecycle(pytester, "--trt-backend", FAKE, "--trt-engine-build", always=(*FAKE_RUN, *QUIET),
                           golden="golden/elsewhere.h5", subprocess=True)
    life.first_run()
    with pytest.raises(pytest.fail.Exception, match=r"step 'approve'.*golden/elsewhere\.h5 was not written"):
        life.approve("why")


def test_importing_the_helpers_loads_no_heavy_library() -> None:
    code = ("import sys, pytest_trt.testing, pytest_trt.testing.register_fake; "
            "print(sorted(m for m in ('tensorrt', 'tensorrt_rtx', 'onnxruntime', 'h5py', 'onnx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_fake_backend_is_not_a_choice_without_its_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--trt-backend", FAKE, *QUIET)
    result.stderr.fnmatch_lines(["*argument --trt-backend: invalid choice: 'fake'*"])


def test_the_docs_snippet_runs(pytester: pytest.Pytester) -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "testing.md").read_text(encoding="utf-8")
    section = text[text.index("## Testing your own plugin code"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/testing.md's pytest_trt.testing section has no python block"
    pytester.makepyfile(test_my_conftest=match.group(1))
    pytester.runpytest_subprocess("-p", "pytester", *QUIET).assert_outcomes(passed=1)


def test_auto_never_picks_the_fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_trt.errors import BackendUnavailable

    with fake_backend():
        assert FAKE in registry.choices() and FAKE not in registry.auto_order()
        monkeypatch.setattr(registry, "module_available", lambda name: name == FAKE)  # only the fake is there
        with pytest.raises(BackendUnavailable, match="no backend is installed"):
            registry.choose_backend("auto")
        assert registry.choose_backend(FAKE) == (FAKE, "requested with --trt-backend")
