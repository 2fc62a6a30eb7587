"""``--trt-catalog``: a real pytest session (with and without xdist) indexes every bundle it writes."""

from __future__ import annotations

import json

import pytest

from pytest_trt.cli import main
from pytest_trt.options import CATALOG, MLFLOW_REGISTER
from tests.conftest import needs_ort

FAKE = ("-p", "no:cacheprovider", "-p", "pytest_trt.testing.register_fake", "--trt-backend", "fake")

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

PROFILE = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
A = BuildConfig(name="cbr_a", version="1.0", onnx={onnx!r}, profiles=PROFILE)
B = BuildConfig(name="cbr_b", version="2.0", onnx={onnx!r}, profiles=PROFILE)

@pytest.mark.trt(A)
def test_a(trt_engine):
    pass

@pytest.mark.trt(B)
def test_b(trt_engine):
    pass

@pytest.mark.trt(B)
def test_b_again(trt_engine):
    pass
"""


def test_session_indexes_its_bundles(pytester, models, capsys):
    """With xdist (the controller indexes the workers' bundles), then without (a second session).
    Plumbing only: the bundles come from the fake backend of pytest_trt.testing."""
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    result = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build", CATALOG, "-n", "2")
    result.assert_outcomes(passed=3)
    db = pytester.path / "trt-bundles" / "catalog.sqlite"
    result.stdout.fnmatch_lines(["*pytest-trt audit archive*", f"catalog {db}: 2 bundle(s) added, 0 already indexed"])
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["bundles"]
    on_disk = sorted(str(p) for p in (pytester.path / "trt-bundles").glob("*.tar.gz"))
    assert sorted(r["path"] for r in rows) == on_disk and len(on_disk) == 2
    assert sorted(r["config_name"] for r in rows) == ["cbr_a", "cbr_b"]
    # a second session, without xdist, finds them indexed already
    again = pytester.runpytest_subprocess(*FAKE, "-o", "trt_catalog=true", "--trt-engine-build")
    again.stdout.fnmatch_lines([f"catalog {db}: 0 bundle(s) added, 2 already indexed"])


def test_register_without_uri_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", MLFLOW_REGISTER)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trt-mlflow-register registers engines in MLflow and so needs --trt-mlflow-uri*"])


def test_loading_the_plugin_and_cli_imports_neither_mlflow_nor_sqlite():
    import subprocess
    import sys

    code = ("import sys, pytest_trt.plugin, pytest_trt.pytest_plugin.session, pytest_trt.cli; "
            "pytest_trt.cli.build_parser(); "
            "print(sorted(m for m in ('mlflow', 'sqlite3', 'hypothesis', 'tensorrt_rtx', 'onnxruntime') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


GOLDEN_SUITE = """
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset, Profile

CFG = BuildConfig(name="cbr_g", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])
DATA = GoldenDataset.from_arrays({{"input": np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype("float32")}})

@pytest.mark.trt(CFG)
def test_g(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATA, structure="ignore")
"""


@needs_ort
def test_session_indexes_golden_metrics_of_passed_and_failed_checks(pytester, models, capsys):
    """The README: "golden verdicts with their metrics" are indexed, from the golden.json the plugin really writes."""
    from examples.models import conv_bn_relu, save

    pytester.makepyfile(test_model=GOLDEN_SUITE.format(onnx=str(models["conv_bn_relu"])))
    args = ("-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend", "onnxruntime", CATALOG)
    pytester.runpytest_subprocess(*args, "--trt-update-golden", "--trt-approve", "first").assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    db = pytester.path / "trt-bundles" / "catalog.sqlite"
    capsys.readouterr()
    assert main(["catalog", "history", "cbr_g", "--db", str(db), "--json"]) == 0
    [verdict] = [v for b in json.loads(capsys.readouterr().out)["bundles"] for v in b["verdict_rows"]
                 if v["verdict"] == "pass"]
    metrics = {k.split("/")[-1]: v for k, v in verdict["metrics"].items()}
    assert metrics["l2_delta"] == 0.0 and metrics["cosine"] > 0.9999
    # other weights: the failed check keeps its metrics and names its golden file
    other = save(conv_bn_relu(seed=1), pytester.path / "other.onnx")
    pytester.makepyfile(test_model=GOLDEN_SUITE.format(onnx=str(other)))
    pytester.runpytest_subprocess(*args).assert_outcomes(failed=1)
    capsys.readouterr()
    assert main(["catalog", "query", "--db", str(db), "--verdict", "regression", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["bundles"]
    assert main(["catalog", "show", row["sha256"], "--db", str(db), "--json"]) == 0
    [failed] = [v for v in json.loads(capsys.readouterr().out)["bundles"][0]["verdicts"] if v["verdict"] == "fail"]
    assert (failed["golden"], failed["generation"]) == (str(pytester.path / "golden" / "cbr_g.h5"), 1)
    # so retention keeps the newest check against generation 1, the failed one
    assert main(["catalog", "prune", "--db", str(db), "--keep-last", "0", "--older-than", "0d", "--dry-run"]) == 0
    kept = [line for line in capsys.readouterr().out.splitlines() if line.startswith("KEEP")]
    assert [line.split()[1] for line in kept if "newest check against" in line and "generation 1" in line] == \
        [row["path"]]
    metrics = {k.split("/")[-1]: v for k, v in failed["metrics"].items()}
    assert metrics["l2_delta"] > 0.05 and metrics["max_abs"] > 0.0
