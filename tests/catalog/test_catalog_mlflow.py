"""MLflow push against a real MLflow server on 127.0.0.1 (SQLite backend store, local artifact folder).

One server per session (starting it costs tens of seconds on a loaded 2-core machine); everything is read
back through the MLflow client, never from the catalog that wrote it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.catalog.mlflow_push import BUNDLE_TAG
from pytest_trt.cli import main
from tests.catalog.conftest import verdict
from tests.conftest import RTX_VERSION

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                       reason="mlflow is not installed (pip install 'pytest-trt[mlflow]'; CI installs it with [test])"),
]
STARTUP_S = 240


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if importlib.util.find_spec("mlflow.server") is None or importlib.util.find_spec("sqlalchemy") is None:
        pytest.skip("the test server needs full mlflow (mlflow-skinny has only the client): pip install mlflow")
    folder = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    log = (folder / "server.log").open("wb")
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
           "--artifacts-destination", str(folder / "artifacts")]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                with urllib.request.urlopen(uri + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "server.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"mlflow server did not come up on {uri} (exit {proc.poll()}):\n{tail}")
            time.sleep(0.3)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the uvicorn process it started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _client(uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_push_and_register_read_back_through_the_client(tmp_path, mlflow_server, rtx_result, write, capsys):
    folder = tmp_path / "trt-bundles"
    path = write(rtx_result, folder, version="4.0", golden={
        "t.py::acc": verdict(rtx_result, "updated", golden="g/mnv2.h5", generation=2, approver="Ada",
                             reason="upgrade reviewed", metrics={"l2_delta": 0.18, "top1": 0.917})})
    db = str(folder / "catalog.sqlite")
    assert main(["catalog", "add", str(folder), "--db", db]) == 0
    capsys.readouterr()
    assert main(["catalog", "push", "--db", db, "--uri", mlflow_server, "--register"]) == 0
    assert f"PUSHED  {path.resolve()}  run " in capsys.readouterr().out
    sha = hashlib.sha256(path.read_bytes()).hexdigest()

    client = _client(mlflow_server)
    experiment = client.get_experiment_by_name("mnv2")
    [run] = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{BUNDLE_TAG}` = '{sha}'")
    params = run.data.params
    assert (params["config_name"], params["config_version"]) == ("mnv2", "4.0")
    assert (params["backend"], params["backend_version"]) == ("tensorrt-rtx", RTX_VERSION)
    assert params["device"] == "cpu-aot"
    assert run.data.tags["pytest_trt.engine_sha256"] == hashlib.sha256(rtx_result.engine).hexdigest()
    assert run.data.metrics["golden/t.py_acc/l2_delta"] == pytest.approx(0.18)
    assert run.data.metrics["golden/t.py_acc/top1"] == pytest.approx(0.917)
    assert run.data.metrics["golden/updated"] == 1.0
    local = client.download_artifacts(run.info.run_id, f"bundle/{path.name}", str(tmp_path / "dl"))
    assert Path(local).read_bytes() == path.read_bytes()

    [mv] = client.search_model_versions("name='mnv2'")
    assert mv.run_id == run.info.run_id
    assert mv.tags["bundle_sha256"] == sha
    assert mv.tags["approval"] == "g/mnv2.h5 generation 2 by Ada: upgrade reviewed"

    # pushing again is a no-op, also when forced for this bundle: one run, one model version
    assert main(["catalog", "push", "--db", db, "--uri", mlflow_server, "--register"]) == 0
    assert main(["catalog", "push", sha[:12], "--db", db, "--uri", mlflow_server, "--register"]) == 0
    assert len(client.search_runs([experiment.experiment_id])) == 1
    assert len(client.search_model_versions("name='mnv2'")) == 1
    capsys.readouterr()
    assert main(["catalog", "show", sha, "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"mlflow run: {run.info.run_id} in experiment mnv2 at {mlflow_server}" in out
    assert f"registered model: mnv2 version {mv.version} at {mlflow_server}" in out


SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

CFG = BuildConfig(name="cbr_down", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.engine_sha256
"""


def test_server_down_is_reported_and_catalog_push_recovers(pytester, models, mlflow_server, tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    down = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend",
                                           "onnxruntime", "--trt-mlflow-uri", down, "--trt-mlflow-register")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    db = pytester.path / "trt-bundles" / "catalog.sqlite"
    result.stdout.fnmatch_lines([
        "*pytest-trt audit archive*",
        f"catalog {db}: 1 bundle(s) added, 0 already indexed",
        f"mlflow {down}: 0 bundle(s) pushed",
        f"WARNING mlflow push failed for 1 bundle(s) (cbr_down-v1.0-ort*.tar.gz: *); the bundles are kept on disk "
        f"and in the catalog; retry with: pytest-trt catalog push --db trt-bundles/catalog.sqlite --uri {down} --register",
    ])
    [bundle] = (pytester.path / "trt-bundles").glob("*.tar.gz")
    # the printed --db is relative to where pytest ran (pytester's folder, this process's current directory)
    assert main(["catalog", "push", "--db", "trt-bundles/catalog.sqlite", "--uri", mlflow_server, "--register"]) == 0
    client = _client(mlflow_server)
    sha = hashlib.sha256(bundle.read_bytes()).hexdigest()
    [mv] = client.search_model_versions("name='cbr_down'")
    assert mv.tags["bundle_sha256"] == sha and mv.tags["approval"] == "none"
    run = client.get_run(mv.run_id)
    local = client.download_artifacts(run.info.run_id, f"bundle/{bundle.name}", str(tmp_path / "dl"))
    assert Path(local).read_bytes() == bundle.read_bytes()
