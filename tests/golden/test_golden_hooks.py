"""The hook module through pytester: options, usage errors, the fixture, the summary, xdist.

The project under test overrides ``trt_engine`` with an engine of the fake backend
(``pytest_trt.testing.FakeBackend``): these are tests of the hook module's plumbing, so the runs need only
the golden hook module and no real build.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.golden.store import GoldenFile
from pytest_trt.options import APPROVE as APPROVE_OPTION
from pytest_trt.options import GOLDEN_DIR as GOLDEN_DIR_OPTION
from pytest_trt.options import INI_PROVENANCE_FAIL_ON as PROVENANCE_FAIL_ON_INI
from pytest_trt.options import PROVENANCE as PROVENANCE_OPTION
from pytest_trt.options import UPDATE_GOLDEN as UPDATE_OPTION
from pytest_trt.testing import GoldenLifecycle

# the plugin with the conftest's trt_engine; hypothesis would only slow each run down
HOOKS = ("-p", "no:hypothesispytest")
HERE = Path(__file__).resolve().parent

CONFTEST = """
import os
import numpy as np
import pytest
from pytest_trt.config import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.testing import FakeBackend, write_classifier

@pytest.fixture
def trt_engine(tmp_path_factory):
    scale = float(os.environ.get("TINY_SCALE", "1.0"))
    path = write_classifier(tmp_path_factory.mktemp("m") / "tiny.onnx", scale=scale)
    return FakeBackend().engine(BuildConfig(name="tiny", onnx=path, profiles=(Profile(x=((1, 8), (16, 8), (16, 8))),)))

@pytest.fixture
def dataset():
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    return GoldenDataset.from_arrays({"x": x}, labels=np.arange(64) % 5)
"""

TEST = """
def test_tiny(trt_golden, dataset):
    trt_golden.check(dataset=dataset)  # the engine comes from the trt_engine fixture, lazily
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_tiny=TEST)
    return pytester


def test_update_without_approve_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest(*HOOKS, UPDATE_OPTION)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{UPDATE_OPTION} writes approved goldens only: add {APPROVE_OPTION} \"REASON\"*"])
    result = project.runpytest(*HOOKS, APPROVE_OPTION, "why")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{APPROVE_OPTION} is used only with {UPDATE_OPTION}*"])


def test_bad_ini_threshold_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntrt_golden_l2_delta = small\n")
    result = project.runpytest(*HOOKS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*trt_golden_l2_delta: expected a number or 'none', got 'small'*"])


def test_lifecycle_with_the_hooks_alone(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    golden = project.path / "golden" / "tiny.h5"
    life = GoldenLifecycle(project, always=HOOKS, golden="golden/tiny.h5")
    assert life.first_run() == ["test_tiny.py::test_tiny", "--trt-engine-build", UPDATE_OPTION, APPROVE_OPTION,
                                "REASON"]  # 1. no golden: fails with the command, writes nothing
    life.approve("first golden, CR-1").stdout.fnmatch_lines(  # 2. approved update
        ["*trt goldens refreshed*", "*test_tiny.py::test_tiny*", "*tiny.h5 [[]tiny[]] generation 1: new snapshot*"])
    life.check()  # 3. unchanged engine passes
    monkeypatch.setenv("TINY_SCALE", "1.18")  # 4. a changed model fails with the regression lines
    life.regression("*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*")
    project.makeini("[pytest]\ntrt_golden_l2_delta = 0.5\ntrt_golden_drift_sd = none\n")
    result = project.runpytest(*HOOKS)  # ini thresholds apply; the changed ONNX is compared and noted
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*trt golden provenance*", "test_tiny.py::test_tiny",
                                 "*tiny.h5 [[]tiny[]] generation 1: provenance differs (config_hash: golden *"
                                 "onnx_sha256: golden *); within thresholds; approve a refresh to record the new "
                                 "provenance:"])
    result = project.runpytest(*HOOKS, PROVENANCE_OPTION, "fail")  # strict: any difference fails
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the snapshot is tainted: onnx_sha256 differs*"])
    project.makeini("[pytest]\ntrt_golden_l2_delta = 0.5\ntrt_golden_drift_sd = none\n"
                    f"{PROVENANCE_FAIL_ON_INI} = device config_hash\n")
    result = project.runpytest(*HOOKS)  # per field: a config change fails, under the default policy
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the snapshot is tainted: config_hash differs*",
                                 "*provenance differs, compared anyway: onnx_sha256*"])
    project.makeini(f"[pytest]\n{PROVENANCE_FAIL_ON_INI} = gpu\n")
    bad = project.runpytest(*HOOKS)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*provenance field 'gpu' is not one of backend, backend_version, device, config_hash, "
                              "onnx_sha256*"])
    project.makeini("[pytest]\ntrt_golden_l2_delta = 0.5\ntrt_golden_drift_sd = none\n")
    life.approve("retrained, CR-2").stdout.fnmatch_lines(["*generation 2: logits: L2 delta 0.18*"])  # 5. refresh
    life.check()
    with GoldenFile(golden) as g:
        assert [h.generation for h in g.history("tiny")] + [g["tiny"].generation] == [1, 2]
    custom = project.runpytest(*HOOKS, GOLDEN_DIR_OPTION, "elsewhere")
    custom.assert_outcomes(failed=1)
    custom.stdout.fnmatch_lines([f"*{project.path / 'elsewhere' / 'tiny.h5'} does not exist*"])


def test_xdist_updates_and_checks(project: pytest.Pytester) -> None:
    project.makepyfile(test_many="""
        import pytest

        @pytest.mark.parametrize("i", range(6))
        def test_many(trt_golden, dataset, i):
            trt_golden.check(dataset=dataset)
    """)
    args = [sys.executable, "-m", "pytest", *HOOKS, "-p", "xdist", "-n", "2", "-q", "-p", "no:cacheprovider"]
    env_path = f"{Path(__file__).resolve().parents[2]}"
    run = lambda *extra: subprocess.run([*args, *extra], cwd=project.path, capture_output=True, text=True,  # noqa: E731
                                        env={**__import__("os").environ, "PYTHONPATH": env_path}, timeout=180)
    done = run(UPDATE_OPTION, APPROVE_OPTION, "parallel refresh")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "trt goldens refreshed" in done.stdout and done.stdout.count("generation ") >= 7
    with GoldenFile(project.path / "golden" / "tiny.h5") as g:
        generations = [h.generation for h in g.history("tiny")] + [g["tiny"].generation]
        assert generations == list(range(1, 8)) and len(g.approvals()) == 7  # 7 tests, serialized writes
    checked = run()
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "7 passed" in checked.stdout


def test_loading_the_hook_module_does_not_import_h5py() -> None:
    code = "import sys, pytest_trt.plugin, pytest_trt.pytest_plugin.session; print('h5py' in sys.modules)"
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
