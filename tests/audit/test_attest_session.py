"""Attestations written by a real pytest session (TensorRT-RTX builds in a pytester subprocess)."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.options import SIGN_KEY
from tests.conftest import needs_rtx

pytest.importorskip("in_toto_attestation", reason="attestation tests need pip install 'pytest-trt[attest]'")

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.pytest_plugin.session import session_of

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_golden(trt_engine, request):
    session_of(request.config).record(request.node).add_verdict(
        {{"config_hash": trt_engine.result.config_hash, "verdict": "pass", "golden": "golden/cbr.h5",
          "generation": 1, "l2_delta": 0.0}})
"""
#: written by the suite's conftest at the session's end: which attestation libraries the session imported
CONFTEST = """
import json, sys
from pathlib import Path

def pytest_sessionfinish(session):
    names = ("in_toto_attestation", "securesystemslib", "cyclonedx")
    Path("imported.json").write_text(json.dumps(sorted(n for n in names if n in sys.modules)))
"""
RUN = ("-p", "no:cacheprovider", "--trt-backend", "tensorrt-rtx")


@pytest.fixture
def suite(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(CONFTEST)
    return pytester


def _provenance(path):
    for line in path.read_text(encoding="utf-8").splitlines():
        doc = json.loads(base64.b64decode(json.loads(line)["payload"]))
        if doc["predicateType"] == "https://slsa.dev/provenance/v1":
            return doc
    raise AssertionError("no provenance")


@needs_rtx
def test_summary_says_unsigned_and_hit_writes_nothing(suite):
    result = suite.runpytest_subprocess(*RUN, "--trt-engine-build")
    result.assert_outcomes(passed=1)
    [bundle] = (suite.path / "trt-bundles").glob("*.tar.gz")
    attestations = bundle.with_name(bundle.name + ".intoto.jsonl")
    result.stdout.fnmatch_lines(["attestations: 1 bundle(s) attested in <bundle>.intoto.jsonl and .cdx.json "
                                 f"(1 written now), UNSIGNED (no {SIGN_KEY})*"])
    # the command the summary prints, run as printed (the shell expands its glob) in the session's folder
    [command] = re.findall(r"check them with '([^']+)', without a key", result.stdout.str())
    assert command == f"pytest-trt attest verify {suite.path / 'trt-bundles'}/*.tar.gz"
    printed = subprocess.run(["bash", "-c", command], cwd=suite.path, capture_output=True, text=True, check=False,
                             env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"})
    assert printed.returncode == 0 and printed.stdout.startswith(f"{bundle}: OK ("), printed.stdout + printed.stderr
    assert json.loads((suite.path / "imported.json").read_text()) == ["cyclonedx", "in_toto_attestation"]
    # the build's clock times: the cache entry the provider wrote holds the same as the provenance
    [entry] = (suite.path / ".trt_cache").rglob("entry.json")
    clock = json.loads(entry.read_text())["clock"]
    meta = _provenance(attestations)["predicate"]["runDetails"]["metadata"]
    assert (meta["startedOn"], meta["finishedOn"]) == (clock["started"], clock["finished"])
    assert meta["startedOn"] <= meta["finishedOn"]
    before = os.stat(attestations)

    hit = suite.runpytest_subprocess(*RUN)  # a cache hit, the bundle unchanged
    hit.assert_outcomes(passed=1)
    after = os.stat(attestations)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    hit.stdout.fnmatch_lines(["attestations: 1 bundle(s) attested * (0 written now), UNSIGNED*"])
    assert json.loads((suite.path / "imported.json").read_text()) == []

    verify = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "attest", "verify", str(bundle)],
                            capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@needs_rtx
def test_signed_session_and_catalog_uses_the_attested_time(suite, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private, public = tmp_path / "p256.pem", tmp_path / "p256.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    result = suite.runpytest_subprocess(*RUN, "--trt-engine-build", f"{SIGN_KEY}={private}", "--trt-catalog")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["attestations: 1 bundle(s) attested * signed with the --trt-sign-key key"])
    [bundle] = (suite.path / "trt-bundles").glob("*.tar.gz")
    verify = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "attest", "verify", str(bundle),
                             "--public-key", str(public)], capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    finished = _provenance(bundle.with_name(bundle.name + ".intoto.jsonl"))["predicate"]["runDetails"]["metadata"][
        "finishedOn"]
    os.utime(bundle, (86400, 86400))  # the file's mtime says 1970: the catalog must not use it
    db = tmp_path / "catalog.sqlite"
    add = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "catalog", "add", str(bundle), "--db", str(db)],
                         capture_output=True, text=True, check=False)
    assert add.returncode == 0, add.stdout + add.stderr
    row = sqlite3.connect(db).execute("SELECT created, build_finished, attestations FROM bundles").fetchone()
    assert row[0] == finished[:19] + "Z"
    assert row[1] == finished
    assert row[2] == bundle.with_name(bundle.name + ".intoto.jsonl").read_text(encoding="utf-8")
