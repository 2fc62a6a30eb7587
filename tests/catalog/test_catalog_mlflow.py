"""MLflow push against a real MLflow server on 127.0.0.1 (SQLite backend store, local artifact folder).

One server per session (starting it costs tens of seconds on a loaded 2-core machine); everything is read
back through the MLflow client, never from the catalog that wrote it.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import importlib.util
import json
import os
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
from tests.interrupts import spawn, stop

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mlflow") is None,
                       reason="mlflow is not installed (pip install 'pytest-trt[mlflow]'; CI installs it with [test-server])"),
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
    proc = spawn(cmd, stdout=log, stderr=subprocess.STDOUT)  # its own group, stopped also when the run is interrupted
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
        stop(proc, grace_s=30)  # the server and the uvicorn process it started
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


def test_attestations_pushed_to_mlflow(tmp_path, mlflow_server, rtx_result, write, environment, capsys):
    pytest.importorskip("in_toto_attestation", reason="needs pip install 'pytest-trt[attest]'")
    import dataclasses

    from pytest_trt.audit.attest import write_attestations
    from pytest_trt.audit.bundle import BundleInputs, write_bundle

    result = dataclasses.replace(rtx_result, config={**rtx_result.config, "name": "attested"})
    result.set_clock("2026-05-04T03:02:01.000000Z", "2026-05-04T03:02:09.500000Z")
    inputs = BundleInputs(result, None, environment)
    info = write_bundle(inputs, tmp_path / "trt-bundles")
    write_attestations(info, inputs)
    db = str(tmp_path / "catalog.sqlite")
    assert main(["catalog", "add", str(info.path), "--db", db]) == 0
    assert main(["catalog", "push", "--db", db, "--uri", mlflow_server]) == 0
    capsys.readouterr()
    client = _client(mlflow_server)
    [run] = client.search_runs([client.get_experiment_by_name("attested").experiment_id])
    assert run.data.tags["pytest_trt.build_finished"] == "2026-05-04T03:02:09.500000Z"
    assert run.data.params["created"] == "2026-05-04T03:02:09Z"
    name = f"attestations/{info.path.name}.intoto.jsonl"
    local = client.download_artifacts(run.info.run_id, name, str(tmp_path / "dl"))
    assert Path(local).read_bytes() == info.path.with_name(info.path.name + ".intoto.jsonl").read_bytes()


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


# -- credentials in the tracking URI --------------------------------------------------------------------------

SECRET = "pw-7f3a"


def _with_credentials(uri: str) -> str:
    return uri.replace("http://", f"http://alice:{SECRET}@", 1)


def _no_secret(where: str, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    assert SECRET.encode() not in raw, f"the password appears in {where}"
    assert b"alice:" not in raw, f"the URI's user:password appears in {where}"


def _catalog_files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in db.parent.glob(db.name + "*")}


def test_credentials_in_the_uri_are_never_stored_or_printed(pytester, models, mlflow_server, monkeypatch):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")
    import mlflow

    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    secret_uri = _with_credentials(mlflow_server)
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend",
                                           "onnxruntime", f"--trt-mlflow-uri={secret_uri}", "--trt-mlflow-register")
    assert result.ret == 0
    _no_secret("the pytest session's output", "\n".join(result.outlines + result.errlines))
    result.stdout.fnmatch_lines([f"mlflow {mlflow_server}: 1 bundle(s) pushed"])
    assert "View run" in "\n".join(result.outlines + result.errlines)  # mlflow's own lines, with the plain URI
    db = pytester.path / "trt-bundles" / "catalog.sqlite"
    [bundle] = (pytester.path / "trt-bundles").glob("*.tar.gz")
    sha = hashlib.sha256(bundle.read_bytes()).hexdigest()

    # the catalog keeps the URI without credentials as the push key
    import sqlite3

    conn = sqlite3.connect(db)
    assert conn.execute("SELECT uri FROM pushes").fetchall() == [(mlflow_server,)]
    assert conn.execute("SELECT uri FROM registrations").fetchall() == [(mlflow_server,)]
    conn.close()

    # the same credentials reach the client through MLflow's variables, for the call only
    seen: list[tuple[str, str | None, str | None]] = []
    real_init = mlflow.MlflowClient.__init__

    def spy(self: Any, tracking_uri: str | None = None, registry_uri: str | None = None) -> None:
        seen.append((str(tracking_uri), os.environ.get("MLFLOW_TRACKING_USERNAME"),
                     os.environ.get("MLFLOW_TRACKING_PASSWORD")))
        real_init(self, tracking_uri=tracking_uri, registry_uri=registry_uri)

    monkeypatch.setattr(mlflow.MlflowClient, "__init__", spy)
    outputs = []
    for args in (["catalog", "push", sha[:12], "--register"], ["catalog", "push", "--register", "--json"],
                 ["catalog", "push", sha[:12], "--json"]):
        proc_out = _run_main([*args, "--db", str(db), "--uri", secret_uri])
        assert proc_out[0] == 0, proc_out
        outputs.append(proc_out[1])
    assert seen and all(s == (mlflow_server, "alice", SECRET) for s in seen), seen
    assert "MLFLOW_TRACKING_USERNAME" not in os.environ and "MLFLOW_TRACKING_PASSWORD" not in os.environ
    assert f"{mlflow_server}: 1 pushed, 0 failed" in outputs[0]
    assert json.loads(outputs[2])["uri"] == mlflow_server
    for args in (["catalog", "show", sha[:16]], ["catalog", "show", sha[:16], "--json"],
                 ["catalog", "history", "cbr_down", "--json"]):
        code, out = _run_main([*args, "--db", str(db)])
        assert code == 0
        outputs.append(out)
    assert "mlflow run: " in outputs[3] and f"at {mlflow_server} (" in outputs[3]
    for i, out in enumerate(outputs):
        _no_secret(f"CLI output {i}", out)
    for name, data in _catalog_files(db).items():
        _no_secret(name, data)


def _run_main(args: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


def test_credentials_stay_out_of_the_failure_warning_and_its_retry_command(pytester, models, monkeypatch):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'pytest-trt[ort]')")
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    down = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend",
                                           "onnxruntime", f"--trt-mlflow-uri={_with_credentials(down)}")
    assert result.ret == 0
    text = "\n".join(result.outlines + result.errlines)
    _no_secret("the session's output", text)
    result.stdout.fnmatch_lines([
        f"mlflow {down}: 0 bundle(s) pushed",
        f"WARNING mlflow push failed for 1 bundle(s) (cbr_down-v1.0-ort*.tar.gz: *127.0.0.1*); the bundles are kept "
        f"on disk and in the catalog; retry with: pytest-trt catalog push --db trt-bundles/catalog.sqlite --uri {down} "
        "(with the URI's credentials in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD)",
    ])
    db = pytester.path / "trt-bundles" / "catalog.sqlite"
    code, out = _run_main(["catalog", "push", "--db", str(db), "--uri", _with_credentials(down)])
    assert code == 1 and "FAILED  " in out and f"{down}: 0 pushed, 1 failed" in out
    _no_secret("catalog push's failure", out)
    for name, data in _catalog_files(db).items():
        _no_secret(name, data)


@pytest.mark.parametrize(("uri", "redacted", "user", "password"), [
    ("http://alice:pw-7f3a@127.0.0.1:5000", "http://127.0.0.1:5000", "alice", "pw-7f3a"),
    ("https://a%40corp:p%3Aw%2F@host/mlflow?x=1", "https://host/mlflow?x=1", "a@corp", "p:w/"),
    ("http://token@host:80", "http://host:80", "token", None),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000", None, None),
    ("databricks", "databricks", None, None),
])
def test_split_credentials(uri, redacted, user, password):
    from pytest_trt.catalog.credentials import split_credentials

    t = split_credentials(uri)
    assert (t.redacted, t.username, t.password) == (redacted, user, password)
    if password:
        scrubbed = t.scrub(f"API request to {uri}/api/2.0 failed ({password})")
        assert password not in scrubbed and uri.split("@")[0].split(":")[-1] not in scrubbed
        assert scrubbed == f"API request to {redacted}/api/2.0 failed (***)"


class _EchoAuth(http.server.BaseHTTPRequestHandler):
    """A server that answers every request with 400 and the request's basic-auth credentials in the body."""

    def _answer(self) -> None:
        auth = self.headers.get("Authorization", "")
        body = base64.b64decode(auth.split(" ", 1)[1]).decode() if auth.startswith("Basic ") else "no credentials"
        data = f"upstream refused the credentials {body}".encode()
        self.send_response(400)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


def test_a_server_error_quoting_the_credentials_is_scrubbed(tmp_path, ort_result, write, monkeypatch):
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoAuth)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            monkeypatch.delenv(name, raising=False)
        folder = tmp_path / "trt-bundles"
        write(ort_result, folder)
        db = str(folder / "catalog.sqlite")
        assert main(["catalog", "add", str(folder), "--db", db]) == 0
        for extra in ([], ["--json"]):
            code, out = _run_main(["catalog", "push", "--db", db, "--uri", _with_credentials(uri), *extra])
            assert code == 1
            # the server did get the credentials (through MLflow's variables) and quoted them back
            assert "upstream refused the credentials alice:***" in out, out
            assert SECRET not in out
    finally:
        server.shutdown()
        server.server_close()


def test_credentials_an_earlier_release_stored_are_scrubbed_from_the_file(tmp_path, ort_result, write):
    """Rows written with the URI as given (user:password@ included) are rewritten to the redacted key on the next
    write-open, and the password's bytes leave the database file and its WAL; the push still counts as done."""
    import sqlite3

    from pytest_trt.catalog.mlflow_push import unpushed
    from pytest_trt.catalog.store import Catalog

    folder = tmp_path / "trt-bundles"
    write(ort_result, folder)
    db = folder / "catalog.sqlite"
    assert main(["catalog", "add", str(folder), "--db", str(db)]) == 0
    plain = "http://127.0.0.1:5099"
    raw = _with_credentials(plain)
    with sqlite3.connect(db) as conn:  # as an earlier release wrote them: the URI as the user gave it
        (sha,) = conn.execute("SELECT sha256 FROM bundles").fetchone()
        conn.execute("INSERT INTO pushes VALUES (?, ?, 'exp', 'run1', '2026-01-01T00:00:00Z')", (sha, raw))
        conn.execute("INSERT INTO registrations VALUES (?, ?, 'm', '1', '2026-01-01T00:00:00Z')", (sha, raw))
        conn.execute("INSERT INTO registrations VALUES (?, ?, 'm', '1', '2026-01-02T00:00:00Z')", (sha, plain))
    assert any(SECRET.encode() in data for data in _catalog_files(db).values())  # the leak this test is about

    catalog = Catalog(db)
    try:
        assert unpushed(catalog, plain, register=False) == []  # the old push counts under the redacted key
    finally:
        catalog.close()
    for name, data in _catalog_files(db).items():
        _no_secret(name, data)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT uri FROM pushes").fetchall() == [(plain,)]
        assert conn.execute("SELECT uri, time FROM registrations").fetchall() == [(plain, "2026-01-02T00:00:00Z")]
