"""The README's golden section, pasted into a new project, run as a new user would.

The snippet and the commands are read from README.md itself, so the README
cannot drift from what works: step 1 fails naming the command, the printed
command creates the golden, step 3 passes.  Then the same golden under
another recorded ONNX Runtime version (the upgrade case), and the quick-start
backend (TensorRT-RTX on a machine that cannot run its engines) skipping at
the user's line.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import h5py
import numpy as np
import onnx
import pytest
from golden_engines import reseal
from onnx import TensorProto, helper, numpy_helper

from pytest_trt.options import PROVENANCE as PROVENANCE_OPTION
from pytest_trt.testing import GoldenLifecycle

pytest.importorskip("onnxruntime")

README = Path(__file__).resolve().parents[2] / "README.md"
TEST_FILE = "tests/test_golden.py"
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Golden snapshots")
    return text[start : text.index("\n## ", start + 1)]


def readme_snippet() -> str:
    match = re.search(r"```python\n(.*?)```", _section(), re.S)
    assert match, "README's golden section has no python block"
    return match.group(1)


def readme_commands() -> list[list[str]]:
    """The shell block's commands, continuation lines joined, comments dropped, without the leading 'pytest'."""
    block = re.search(r"```(?:bash)?\n(pytest .*?)```", _section(), re.S)
    assert block, "README's golden section has no command block"
    joined = block.group(1).replace("\\\n", " ")
    return [shlex.split(line.split("#")[0])[1:] for line in joined.splitlines() if line.strip()]


def _user_model(path: Path, *, scale: float = 1.0) -> None:
    """A user's own classifier: input (N, 3, 64, 64) -> GlobalAveragePool -> 10 logits."""
    w = (np.random.default_rng(5).standard_normal((3, 10)) * scale).astype(np.float32)
    nodes = [helper.make_node("GlobalAveragePool", ["input"], ["pooled"], name="pool"),
             helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
             helper.make_node("MatMul", ["flat", "w"], ["logits"], name="fc")]
    graph = helper.make_graph(nodes, "user", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                            ["N", 3, 64, 64])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "models").mkdir()
    (pytester.path / "tests").mkdir()
    (pytester.path / "golden_data").mkdir()
    _user_model(pytester.path / "models" / "my_model.onnx")
    rng = np.random.default_rng(11)
    x = rng.random((24, 3, 64, 64), dtype=np.float32) - 0.5
    np.save(pytester.path / "golden_data" / "input.npy", x)
    np.save(pytester.path / "golden_data" / "labels.npy", np.arange(24) % 10)
    (pytester.path / TEST_FILE).write_text(readme_snippet(), encoding="utf-8")
    return pytester


def _approve(project: pytest.Pytester) -> None:
    first, create, check = readme_commands()
    life = GoldenLifecycle(project, *first, always=QUIET, golden="golden/my_model.h5")
    # one command, whether pytest shows it once (failure section) or twice (CI=true: untruncated summary too)
    printed = life.first_run()
    assert life.last is not None
    life.last.stdout.fnmatch_lines(["*no golden for 'my_model'*does not exist. Goldens are never created silently*"])
    assert printed[:-1] == create[:-1]  # the README's step 2 is the printed command, with a real reason
    life.approve(create[-1]).stdout.fnmatch_lines(["*my_model.h5 [[]my_model[]] generation 1: new snapshot*"])
    assert check == first  # the README's step 3 is step 1 again
    life.check()


def test_readme_golden_flow_runs_verbatim(project: pytest.Pytester) -> None:
    _approve(project)
    golden = project.path / "golden" / "my_model.h5"
    assert golden.is_file()
    # a changed model fails with the incident's line, and says what else was checked
    _user_model(project.path / "models" / "my_model.onnx", scale=1.18)
    first = readme_commands()[0]
    result = project.runpytest(*first, *QUIET)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*",
                                 "*Other metrics checked:", "*[[]ok[]] logits: Top-1 Acc drop: *"])


def _record_version(golden: Path, version: str) -> str:
    """Rewrite the snapshot's recorded ONNX Runtime version, as a golden approved under that version holds."""
    with h5py.File(golden, "r+") as f:
        snap = f["snapshots/my_model"]
        prov = json.loads(snap.attrs["provenance"])
        old = prov["backend_version"]
        prov["backend_version"] = version
        snap.attrs["provenance"] = json.dumps(prov, sort_keys=True)
    reseal(golden)
    return str(old)


def test_golden_of_another_onnxruntime_version(project: pytest.Pytester) -> None:
    _approve(project)
    now = _record_version(project.path / "golden" / "my_model.h5", "1.23.2")
    first = readme_commands()[0]
    within = project.runpytest(*first, *QUIET)  # an upgrade within thresholds passes, with the note
    within.assert_outcomes(passed=1)
    within.stdout.fnmatch_lines(["*trt golden provenance*", "tests/test_golden.py::test_my_model_golden",
                                 f"*my_model.h5 [[]my_model[]] generation 1: provenance differs (backend_version: "
                                 f"golden onnxruntime 1.23.2, engine onnxruntime {now}); within thresholds; "
                                 "approve a refresh to record the new provenance:"])
    (bundle,) = (project.path / "trt-bundles").glob("*.tar.gz")  # stored with the verdict in the audit bundle
    from pytest_trt.audit.verify import verify_bundle

    stored = verify_bundle(bundle).golden or {}
    verdict = stored["tests/test_golden.py::test_my_model_golden"]
    assert verdict["verdict"] == "pass" and "within thresholds" in verdict["message"]
    assert verdict["detail"]["provenance"] == [{"field": "backend_version", "golden": "onnxruntime 1.23.2",
                                                "engine": f"onnxruntime {now}", "fatal": False}]
    assert {c["metric"] for c in verdict["detail"]["checks"]} >= {"l2_delta", "top1_drop", "top1_agreement"}
    strict = project.runpytest(*first, *QUIET, PROVENANCE_OPTION, "fail")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines([f"*the snapshot is tainted: backend_version differs (golden 'onnxruntime "
                                 f"1.23.2', now 'onnxruntime {now}')*"])
    _user_model(project.path / "models" / "my_model.onnx", scale=1.18)
    beyond = project.runpytest(*first, *QUIET)  # beyond thresholds: the outputs decide, provenance is shown
    beyond.assert_outcomes(failed=1)
    beyond.stdout.fnmatch_lines(["*[[]GOLDEN[]] provenance differs, compared anyway: backend_version: golden "
                                 f"onnxruntime 1.23.2, engine onnxruntime {now}",
                                 "*[[]REGRESSION[]] logits: Output L2 norm delta: 0.18 > threshold(0.05)*"])


def _rtx_cannot_run_here() -> str | None:
    if importlib.util.find_spec("tensorrt") is not None:
        return "full TensorRT is installed: auto picks it, not TensorRT-RTX"
    if importlib.util.find_spec("tensorrt_rtx") is None:
        return "tensorrt-rtx is not installed"
    from pytest_trt.backends.tensorrt import TensorRTBackend

    if TensorRTBackend("tensorrt_rtx").not_runnable_reason() is None:
        return "this machine can run TensorRT-RTX engines"
    return None


@pytest.mark.skipif(_rtx_cannot_run_here() is not None, reason=str(_rtx_cannot_run_here()))
def test_quick_start_backend_skips_at_the_users_line(project: pytest.Pytester) -> None:
    project.makepyfile(**{"tests/test_run": """
        import numpy as np
        import pytest
        from test_golden import MODEL

        @pytest.mark.trt(MODEL)
        def test_run(trt_engine):
            trt_engine.run({"input": np.zeros((2, 3, 64, 64), np.float32)})
    """})
    snippet = readme_snippet().splitlines()
    check_line = next(i for i, line in enumerate(snippet, 1) if "trt_golden.check(" in line)
    result = project.runpytest("--trt-engine-build", "-rs", "tests", *QUIET)  # the default backend: auto
    result.assert_outcomes(skipped=2)
    reason = ("cannot run tensorrt-rtx engine 'my_model' here: *; tensorrt-rtx engines need an NVIDIA GPU to run "
              "(build-time assertions still work). Hint: --trt-backend onnxruntime runs engines on this CPU")
    result.stdout.fnmatch_lines_random([f"SKIPPED [[]1[]] tests/test_golden.py:{check_line}: {reason}",
                                        f"SKIPPED [[]1[]] tests/test_run.py:7: {reason}"])
