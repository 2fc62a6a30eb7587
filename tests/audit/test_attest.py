"""Attestations beside bundles, checked by tools that are not pytest-trt.

Real TensorRT-RTX builds (the 3-node model), real keys made here with ``cryptography``;
the DSSE envelopes are verified by securesystemslib and by a bare PAE check written
here from the DSSE specification, the statements by the in-toto attestation library's
protobuf types, the ML-BOM by cyclonedx-python-lib's strict CycloneDX 1.6 schema.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("in_toto_attestation", reason="attestation tests need pip install 'pytest-trt[attest]'")
pytest.importorskip("securesystemslib", reason="attestation tests need pip install 'pytest-trt[attest]'")
pytest.importorskip("cyclonedx", reason="attestation tests need pip install 'pytest-trt[attest]'")
pytest.importorskip("cryptography", reason="signing tests need pip install 'pytest-trt[sign]'")

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519  # noqa: E402

from pytest_trt.audit.attest import attestation_path, bom_path, write_attestations  # noqa: E402
from pytest_trt.audit.attest_verify import verify_attestations  # noqa: E402
from pytest_trt.audit.bundle import BundleInputs, write_bundle  # noqa: E402

STARTED, FINISHED = "2026-03-01T09:15:02.250000Z", "2026-03-01T09:15:04.750000Z"
GOLDEN = {
    "tests/test_m.py::test_top1": {"verdict": "pass", "golden": "golden/cbr.h5", "generation": 3,
                                   "metrics": {"top1_agreement": 0.998, "max_abs": 0.0125}},
    "tests/test_m.py::test_tail": {"verdict": "regression", "golden": "golden/cbr.h5", "generation": 3,
                                   "l2_delta": 0.5},
}
ENV = {"schema": 1, "python": {"version": "3.11.7", "implementation": "CPython"},
       "cuda": {"runtime": "12.8", "driver": "570.86"}, "gpus": [{"name": "NVIDIA L4", "compute_capability": "8.9"}]}


def _keys(folder: Path, kind: str) -> tuple[Path, Path]:
    key = ed25519.Ed25519PrivateKey.generate() if kind == "ed25519" else ec.generate_private_key(ec.SECP256R1())
    private, public = folder / f"{kind}.pem", folder / f"{kind}.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("attest-keys")
    return {kind: _keys(folder, kind) for kind in ("ed25519", "p256")}


def _clocked(result: Any, started: str = STARTED, finished: str = FINISHED) -> Any:
    clocked = dataclasses.replace(result)
    clocked.set_clock(started, finished)
    return clocked


def _attested(folder: Path, result: Any, key: Path | None, **fields: Any) -> tuple[Path, BundleInputs]:
    inputs = BundleInputs(result, None, ENV, include_engine=False, golden_results=fields.pop("golden", GOLDEN),
                          calibration_cache=b"TRT-1001-EntropyCalibration2\ninput: 3c010a14\n", sign_key=key, **fields)
    info = write_bundle(inputs, folder)
    write_attestations(info, inputs)
    return info.path, inputs


def _lines(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in attestation_path(bundle).read_text(encoding="utf-8").splitlines()]


def _payload(envelope: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return doc


@pytest.fixture(params=["unsigned", "ed25519", "p256"])
def attested(request: pytest.FixtureRequest, tmp_path: Path, small_build: Any,
             keys: dict[str, tuple[Path, Path]]) -> tuple[Path, Path | None, Any]:
    """(bundle, public key or None, build result) with attestations beside the bundle."""
    pair = keys.get(request.param)
    result = _clocked(small_build)
    bundle, _ = _attested(tmp_path, result, pair[0] if pair else None)
    return bundle, pair[1] if pair else None, result


def test_statements_validate_with_in_toto_attestation(attested):
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    bundle, _, result = attested
    docs = [_payload(e) for e in _lines(bundle)]
    assert [d["predicateType"] for d in docs] == ["https://slsa.dev/provenance/v1",
                                                  "https://in-toto.io/attestation/test-result/v0.1",
                                                  "https://cyclonedx.org/bom"]
    for doc in docs:
        Statement.copy_from_pb(json_format.ParseDict(doc, statement_pb2.Statement())).validate()
        assert doc["subject"] == [{"name": f"{bundle.name}/engine.plan",
                                   "digest": {"sha256": hashlib.sha256(result.engine).hexdigest()}}]
    json_format.ParseDict(docs[0]["predicate"], provenance_pb2.Provenance())
    json_format.ParseDict(docs[1]["predicate"], test_result_pb2.TestResult())
    build = docs[0]["predicate"]["buildDefinition"]
    assert build["externalParameters"]["config_hash"] == result.config_hash
    deps = {d["name"]: d.get("digest") for d in build["resolvedDependencies"]}
    from examples.models import conv_bn_relu  # the model the build parsed: its digest computed here

    assert deps["ONNX model"] == {"sha256": hashlib.sha256(conv_bn_relu().SerializeToString()).hexdigest()}
    assert deps["calibration cache"] == {
        "sha256": hashlib.sha256(b"TRT-1001-EntropyCalibration2\ninput: 3c010a14\n").hexdigest()}
    assert "golden/cbr.h5" in deps
    run = docs[0]["predicate"]["runDetails"]
    assert run["byproducts"] == [{"name": bundle.name, "digest": {"sha256": hashlib.sha256(
        bundle.read_bytes()).hexdigest()}}]
    assert run["builder"]["version"]["tensorrt-rtx"] == result.backend_version


def test_dsse_verifies_with_securesystemslib(attested):
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    bundle, public, _ = attested
    envelopes = _lines(bundle)
    if public is None:
        assert all(e["signatures"] == [] for e in envelopes)
        return
    key = SSlibKey.from_crypto(serialization.load_pem_public_key(public.read_bytes()))
    for e in envelopes:
        assert list(Envelope.from_dict(copy.deepcopy(e)).verify([key], 1)) == [key.keyid]
        edited = copy.deepcopy(e)
        doc = _payload(e)
        doc["subject"][0]["digest"]["sha256"] = "0" * 64
        edited["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
        with pytest.raises(VerificationError):
            Envelope.from_dict(edited).verify([key], 1)


def test_dsse_verifies_with_bare_pae_and_cryptography(attested):
    """The DSSE v1 signing input written out here from the specification, checked by cryptography alone."""
    bundle, public, _ = attested
    if public is None:
        pytest.skip("unsigned")
    key = serialization.load_pem_public_key(public.read_bytes())
    for e in _lines(bundle):
        payload, kind = base64.b64decode(e["payload"]), e["payloadType"].encode()
        message = b"DSSEv1 " + str(len(kind)).encode() + b" " + kind + b" " + str(len(payload)).encode() + b" " + payload
        sig = base64.b64decode(e["signatures"][0]["sig"])
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(sig, message, ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(sig, message)


def test_bom_is_strict_cyclonedx_1_6(attested):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    bundle, _, result = attested
    text = bom_path(bundle).read_text(encoding="utf-8")
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc == _payload(_lines(bundle)[2])["predicate"]
    engine = doc["metadata"]["component"]
    assert engine["type"] == "machine-learning-model"
    assert engine["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(result.engine).hexdigest()}]
    kinds = {c["name"]: c["type"] for c in doc["components"]}
    assert kinds["golden/cbr.h5"] == "data" and kinds["calibration cache"] == "data"
    assert kinds["ONNX model"] == "machine-learning-model" and kinds["tensorrt-rtx"] == "library"
    assert doc["metadata"]["timestamp"].startswith("2026-03-01T09:15:04")


def test_test_result_lists_verdicts_and_metrics(attested):
    bundle, _, _ = attested
    pred = _payload(_lines(bundle)[1])["predicate"]
    assert pred["result"] == "FAILED"  # one regression among the two checks
    assert pred["passedTests"] == ["tests/test_m.py::test_top1"]
    assert pred["failedTests"] == ["tests/test_m.py::test_tail"]
    by_test = {c["annotations"]["test"]: c["annotations"] for c in pred["configuration"]}
    assert by_test["tests/test_m.py::test_top1"]["metrics"] == {"top1_agreement": 0.998, "max_abs": 0.0125}
    assert by_test["tests/test_m.py::test_tail"]["metrics"] == {"l2_delta": 0.5}
    assert by_test["tests/test_m.py::test_top1"]["generation"] == 3


def test_attest_verify_passes_every_check(attested):
    bundle, public, _ = attested
    report = verify_attestations(bundle, public_key=public)
    assert report.ok, [c for c in report.checks if not c.ok]
    names = {c.name for c in report.checks}
    assert {"provenance: signature", "provenance: subject", "ML-BOM: CycloneDX 1.6", "test result: tests",
            "provenance: config_hash"} <= names


def test_provenance_times_come_from_the_clock(tmp_path, small_build, monkeypatch):
    """The provider reads the clock around the build; the times reach the provenance, not the bundle."""
    from pytest_trt.common import units
    from pytest_trt.engines.cache import EngineCache

    ticks = iter(["2031-07-04T10:00:00.000001Z", "2031-07-04T10:00:09.500000Z"])
    monkeypatch.setattr(units, "utc_now", lambda: next(ticks))
    result = dataclasses.replace(small_build)
    result.set_clock(units.utc_now(), units.utc_now())
    cache = EngineCache(tmp_path / "cache")
    cache.store("k" * 64, result)
    loaded = cache.load("k" * 64)
    assert loaded is not None and loaded.clock() == {"started": "2031-07-04T10:00:00.000001Z",
                                                     "finished": "2031-07-04T10:00:09.500000Z"}
    bundle, _ = _attested(tmp_path / "b", loaded, None)
    meta = _payload(_lines(bundle)[0])["predicate"]["runDetails"]["metadata"]
    assert meta == {"startedOn": "2031-07-04T10:00:00.000001Z", "finishedOn": "2031-07-04T10:00:09.500000Z"}


def test_bundle_bytes_do_not_depend_on_the_clock(tmp_path, small_build):
    first, _ = _attested(tmp_path / "a", _clocked(small_build, STARTED, FINISHED), None)
    second, _ = _attested(tmp_path / "b", _clocked(small_build, "2027-01-01T00:00:00.000000Z",
                                                   "2027-01-01T00:01:00.000000Z"), None)
    assert first.read_bytes() == second.read_bytes()
    started = [_payload(_lines(p)[0])["predicate"]["runDetails"]["metadata"]["startedOn"] for p in (first, second)]
    assert started == [STARTED, "2027-01-01T00:00:00.000000Z"]


def test_signed_attestations_are_deterministic(tmp_path, small_build, keys):
    for kind in ("ed25519", "p256"):
        a, _ = _attested(tmp_path / f"{kind}-a", _clocked(small_build), keys[kind][0])
        b, _ = _attested(tmp_path / f"{kind}-b", _clocked(small_build), keys[kind][0])
        assert attestation_path(a).read_bytes() == attestation_path(b).read_bytes()
        assert a.read_bytes() == b.read_bytes()  # the manifest signature too (RFC 6979 for P-256)


def _failed(report: Any) -> dict[str, str]:
    return {c.name: c.text for c in report.checks if not c.ok}


def test_changed_engine_byte_fails_attest_verify(tmp_path, small_build, keys):
    private, public = keys["ed25519"]
    bundle, inputs = _attested(tmp_path, _clocked(small_build), private)
    engine = bytearray(small_build.engine)
    engine[len(engine) // 2] ^= 0x01
    changed = dataclasses.replace(small_build, engine=bytes(engine))  # one engine byte, a bundle signed anew
    write_bundle(dataclasses.replace(inputs, result=changed), tmp_path)
    failed = _failed(verify_attestations(bundle, public_key=public))
    assert "the engine changed after it was attested" in failed["provenance: subject"]
    assert "ML-BOM: engine" in failed


def test_changed_config_field_fails_attest_verify(tmp_path, small_build, keys):
    private, public = keys["p256"]
    bundle, inputs = _attested(tmp_path, _clocked(small_build), private)
    config = {**small_build.config, "builder_optimization_level": 5}
    write_bundle(dataclasses.replace(inputs, result=dataclasses.replace(small_build, config=config)), tmp_path)
    failed = _failed(verify_attestations(bundle, public_key=public))
    assert failed["provenance: config"].startswith("the pinned config differs")
    assert "provenance: bundle file" in failed
    # an attested config edited in the statement: the signature no longer verifies
    bundle2, _ = _attested(tmp_path / "edit", _clocked(small_build), private)
    lines = _lines(bundle2)
    doc = _payload(lines[0])
    doc["predicate"]["buildDefinition"]["externalParameters"]["config"]["builder_optimization_level"] = 5
    lines[0]["payload"] = base64.b64encode(json.dumps(doc).encode()).decode()
    path = attestation_path(bundle2)
    path.chmod(0o644)
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    failed = _failed(verify_attestations(bundle2, public_key=public))
    assert failed["provenance: signature"] == "the signature does not match the statement: it was edited after signing"


def test_unsigned_attestation_with_public_key_fails(tmp_path, small_build, keys):
    bundle, _ = _attested(tmp_path, _clocked(small_build), None)
    failed = _failed(verify_attestations(bundle, public_key=keys["ed25519"][1]))
    assert "unsigned, but" in failed["provenance: signature"]


def test_attestation_signed_by_another_key_fails(tmp_path, small_build, keys):
    bundle, _ = _attested(tmp_path, _clocked(small_build), keys["ed25519"][0])
    failed = _failed(verify_attestations(bundle, public_key=keys["p256"][1]))
    assert "not by" in failed["bundle"]  # the manifest signature, checked by the bundle verifier
    assert "not by" in failed["provenance: signature"]


def test_removed_statement_fails(tmp_path, small_build):
    bundle, _ = _attested(tmp_path, _clocked(small_build), None)
    path = attestation_path(bundle)
    kept = path.read_text(encoding="utf-8").splitlines()[:2]
    path.chmod(0o644)
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    failed = _failed(verify_attestations(bundle))
    assert "holds 0 ML-BOM statement(s)" in failed["ML-BOM: present"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", "attest", "verify", *args],
                          capture_output=True, text=True, check=False)


def test_attest_verify_cli_exit_codes_and_messages(tmp_path, small_build, keys):
    private, public = keys["ed25519"]
    bundle, inputs = _attested(tmp_path, _clocked(small_build), private)
    ok = _cli(str(bundle), "--public-key", str(public))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith(f"{bundle}: OK (")
    assert "ok    provenance: signature: DSSE signature verified by securesystemslib" in ok.stdout
    doc = json.loads(_cli(str(bundle), "--json").stdout)
    assert doc["exit_code"] == 0 and doc["results"][0]["ok"] is True
    config = {**small_build.config, "builder_optimization_level": 5}
    write_bundle(dataclasses.replace(inputs, result=dataclasses.replace(small_build, config=config)), tmp_path)
    bad = _cli(str(bundle), "--public-key", str(public))
    assert bad.returncode == 1
    assert "FAIL  provenance: config: the pinned config differs" in bad.stdout
    missing = _cli(str(tmp_path / "nothing.tar.gz"))
    assert missing.returncode == 3 and f"{tmp_path / 'nothing.tar.gz'}: no such bundle" in missing.stderr
    attestations_gone = tmp_path / "copy.tar.gz"
    attestations_gone.write_bytes(bundle.read_bytes())
    alone = _cli(str(attestations_gone))
    assert alone.returncode == 3 and "no attestations beside the bundle" in alone.stderr
    folder = _cli(str(tmp_path), "--json")  # the bundle folder, as the session's summary names it
    assert folder.returncode == 3 and f"{tmp_path} is a folder, not a bundle: name its bundles" in folder.stderr
    assert json.loads(folder.stdout)["results"][0]["ok"] is False


def test_attestations_of_a_replaced_bundle_are_not_written(tmp_path, small_build):
    """A writer on another thread or process replaced the bundle after these statements were made: they name the
    old bytes, so nothing is written (the new bundle's writer attests its own) and the sidecar keeps its marker."""
    from pytest_trt.audit import sidecar
    from pytest_trt.audit.attest import prepare_attestations, store_attestations

    result = _clocked(small_build)
    first = BundleInputs(result, None, ENV, include_engine=False, golden_results=GOLDEN)
    old = write_bundle(first, tmp_path)
    prepared = prepare_attestations(old, first)
    new = write_bundle(dataclasses.replace(first, golden_results={}), tmp_path)  # same name, other bytes
    assert new.path == old.path and new.sha256 != old.sha256
    assert store_attestations(old, prepared, {"bundle_sha256": old.sha256, "key": None}) is False
    assert not attestation_path(old.path).exists() and not bom_path(old.path).exists()
    state = sidecar.read_state(new.path)
    assert state is not None and state.sha256 == new.sha256 and state.attested is None
    # the statements of the bundle on disk are written, and the sidecar says so
    marker = {"bundle_sha256": new.sha256, "key": None}
    assert store_attestations(new, prepare_attestations(new, dataclasses.replace(first, golden_results={})), marker)
    assert verify_attestations(new.path).ok
    state = sidecar.read_state(new.path)
    assert state is not None and state.attested == marker
