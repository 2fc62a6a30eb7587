"""Check a bundle's attestations with tools that are not pytest-trt, and against the bundle itself.

Each envelope of ``<bundle>.intoto.jsonl`` is verified with securesystemslib's DSSE
verifier (with the public key given), its statement with the in-toto attestation
library, and the ML-BOM with cyclonedx-python-lib's strict JSON schema validator
for CycloneDX 1.6.  Then what the statements say is compared with the verified
bundle: the subject is its engine, the provenance's config and hashes are its
config.json's, the test result lists its golden checks, the byproduct is its file.
Every check is reported, passed or failed, with a sentence saying why.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit import attest as a

if TYPE_CHECKING:
    from pytest_trt.audit.verify import VerifiedBundle


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    text: str


@dataclass
class AttestReport:
    bundle: Path
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, ok: bool, text: str) -> None:
        self.checks.append(Check(name, ok, text))


class AttestationMissing(FileNotFoundError):
    """No ``<bundle>.intoto.jsonl`` beside the bundle."""


def _dsse(report: AttestReport, label: str, env: Mapping[str, Any], public_key: Any | None,
          key_path: Path | None) -> None:
    """The envelope's signature, checked by securesystemslib (never by pytest-trt's own PAE)."""
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer._key import SSlibKey

    signatures = list(env.get("signatures") or [])
    if public_key is None:
        text = (f"signed by keyid {signatures[0].get('keyid', '?')[:16]}..., not checked (give --public-key)"
                if signatures else "unsigned (the session had no --trt-sign-key)")
        report.add(f"{label}: signature", True, text)
        return
    if not signatures:
        report.add(f"{label}: signature", False,
                   f"unsigned, but {key_path} was given: the session that wrote it had no --trt-sign-key")
        return
    key = SSlibKey.from_crypto(public_key)
    try:
        Envelope.from_dict(copy.deepcopy(dict(env))).verify([key], 1)
    except VerificationError:
        ids = ", ".join(str(s.get("keyid", "?"))[:16] for s in signatures)
        if key.keyid not in {s.get("keyid") for s in signatures}:
            why = f"signed by keyid {ids}..., not by {key_path} (keyid {key.keyid[:16]}...)"
        else:
            why = "the signature does not match the statement: it was edited after signing"
        report.add(f"{label}: signature", False, why)
        return
    except Exception as exc:  # noqa: BLE001 - a malformed envelope: say what the verifier said
        report.add(f"{label}: signature", False, f"not a DSSE envelope securesystemslib can read ({exc})")
        return
    report.add(f"{label}: signature", True, f"DSSE signature verified by securesystemslib with {key_path}")


def _expect(report: AttestReport, name: str, got: Any, want: Any, what: str) -> None:
    if got == want:
        report.add(name, True, f"{what} matches the bundle")
    else:
        report.add(name, False, f"{what} differs: the attestation says {_short(got)}, the bundle {_short(want)}")


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def _provenance(report: AttestReport, doc: Mapping[str, Any], vb: VerifiedBundle) -> None:
    from pytest_trt.audit import bundle as b

    pred = doc["predicate"]
    params = pred["buildDefinition"].get("externalParameters") or {}
    config = vb.config
    _expect(report, "provenance: config_hash", params.get("config_hash"), config.get("config_hash"), "config_hash")
    _expect(report, "provenance: config", params.get("config"), config.get("pinned"), "the pinned config")
    deps = {d.get("name"): (d.get("digest") or {}).get("sha256") for d in pred["buildDefinition"].get(
        "resolvedDependencies") or []}
    _expect(report, "provenance: ONNX model", deps.get("ONNX model"), config.get("onnx_sha256"), "the ONNX sha256")
    calib = vb.docs.get(b.CALIBRATION) or {}
    _expect(report, "provenance: calibration cache", deps.get("calibration cache"), calib.get("cache_sha256"),
            "the calibration cache sha256")
    _expect(report, "provenance: Q/DQ model", deps.get("Q/DQ model"), calib.get("qdq_model_sha256"),
            "the Q/DQ model sha256")
    byproducts = pred.get("runDetails", {}).get("byproducts") or [{}]
    _expect(report, "provenance: bundle file", (byproducts[0].get("digest") or {}).get("sha256"), vb.sha256,
            "the bundle file's sha256 (byproduct)")


def _test_result(report: AttestReport, doc: Mapping[str, Any], vb: VerifiedBundle) -> None:
    pred = doc["predicate"]
    golden = vb.golden or {}
    listed = sorted([*pred.get("passedTests", []), *pred.get("failedTests", []), *pred.get("warnedTests", [])])
    _expect(report, "test result: tests", listed, sorted(golden), "the list of golden checks")
    passed = sorted(t for t, v in golden.items() if str(v.get("verdict")) in a.PASSED_VERDICTS)
    _expect(report, "test result: verdicts", sorted(pred.get("passedTests", [])), passed, "the passed checks")


def _bom(report: AttestReport, doc: Mapping[str, Any], vb: VerifiedBundle, bundle: Path) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = json.dumps(doc["predicate"])
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is None:
        report.add("ML-BOM: CycloneDX 1.6", True, "valid CycloneDX 1.6 JSON (cyclonedx-python-lib strict validator)")
    else:
        message = getattr(getattr(error, "data", None), "message", None) or str(error)[:200]
        report.add("ML-BOM: CycloneDX 1.6", False, f"not valid CycloneDX 1.6: {message}")
    component = (doc["predicate"].get("metadata") or {}).get("component") or {}
    hashes = {h.get("alg"): h.get("content") for h in component.get("hashes") or []}
    _expect(report, "ML-BOM: engine", hashes.get("SHA-256"), vb.engine_sha256, "the engine sha256 in the ML-BOM")
    cdx = a.bom_path(bundle)
    if cdx.is_file():
        try:
            alone = json.loads(cdx.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            report.add("ML-BOM: file", False, f"{cdx.name} is not readable JSON ({exc})")
            return
        ok = alone == doc["predicate"]
        report.add("ML-BOM: file", ok, f"{cdx.name} " + ("is the attested ML-BOM" if ok else
                                                        "differs from the attested ML-BOM: it was edited"))


def verify_attestations(bundle: Path, *, public_key: Path | None = None) -> AttestReport:
    """Every check of ``bundle``'s attestations; raises :class:`AttestationMissing` when there are none,
    ``ImportError`` without the libraries, and the key loader's errors for a bad key file."""
    from pytest_trt.audit.sign import load_public_key
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.errors import BundleIntegrityError

    bundle = Path(bundle)
    if bundle.is_dir():
        from pytest_trt.audit import bundles_in

        raise AttestationMissing(f"{bundle} is a folder, not a bundle: name its bundles, e.g. "
                                 f"pytest-trt attest verify {bundles_in(bundle)}")
    if not bundle.is_file():
        raise AttestationMissing(f"{bundle}: no such bundle")
    path = a.attestation_path(bundle)
    if not path.is_file():
        raise AttestationMissing(f"{path}: no attestations beside the bundle (written by a session with the "
                                 "'attest' extra installed and ini trt_attest = true)")
    import in_toto_attestation  # noqa: F401 - the verifiers' libraries, before any check is reported
    import securesystemslib  # noqa: F401

    key = load_public_key(public_key) if public_key is not None else None
    report = AttestReport(bundle)
    vb: VerifiedBundle | None = None
    try:
        vb = verify_bundle(bundle, public_key=public_key)
        report.add("bundle", True, "manifest, members" + (" and signature" if vb.signer else "") + " verified")
    except BundleIntegrityError as exc:
        report.add("bundle", False, exc.message)
    seen: dict[str, int] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        label = f"line {n}"
        try:
            env = json.loads(line)
            payload = base64.b64decode(env["payload"], validate=True)
            doc = json.loads(payload)
        except (ValueError, KeyError, TypeError) as exc:
            report.add(label, False, f"not a DSSE envelope of a JSON statement ({type(exc).__name__}: {exc})")
            continue
        kind = str(doc.get("predicateType"))
        label = {a.PROVENANCE: "provenance", a.TEST_RESULT: "test result", a.CYCLONEDX: "ML-BOM"}.get(kind, label)
        seen[kind] = seen.get(kind, 0) + 1
        if env.get("payloadType") != a.PAYLOAD_TYPE:
            report.add(f"{label}: payload type", False, f"payloadType is {env.get('payloadType')!r}, not "
                                                        f"{a.PAYLOAD_TYPE!r}")
        _dsse(report, label, env, key, public_key)
        try:
            a.validate_statement(doc)
        except ValueError as exc:
            report.add(f"{label}: in-toto statement", False, f"the in-toto attestation library rejects it: {exc}")
            continue
        report.add(f"{label}: in-toto statement", True, f"valid in-toto Statement v1 ({kind})")
        if vb is None:
            continue
        subjects = [(s.get("digest") or {}).get("sha256") for s in doc.get("subject") or []]
        ok = subjects == [vb.engine_sha256]
        report.add(f"{label}: subject", ok, "the subject is the bundle's engine" if ok else
                   f"the subject is engine sha256 {', '.join(map(str, subjects))[:16]}..., the bundle holds engine "
                   f"{vb.engine_sha256[:16]}...: the engine changed after it was attested")
        if kind == a.PROVENANCE:
            _provenance(report, doc, vb)
        elif kind == a.TEST_RESULT:
            _test_result(report, doc, vb)
        elif kind == a.CYCLONEDX:
            _bom(report, doc, vb, bundle)
    for kind, name in ((a.PROVENANCE, "SLSA provenance"), (a.TEST_RESULT, "test result"), (a.CYCLONEDX, "ML-BOM")):
        if seen.get(kind, 0) != 1:
            report.add(f"{name}: present", False, f"{path.name} holds {seen.get(kind, 0)} {name} statement(s), "
                                                  "one expected: a line was removed, added or replaced")
    return report


def build_times(bundle: Path, *, bundle_sha256: str, engine_sha256: str) -> tuple[str | None, str | None, str | None]:
    """(startedOn, finishedOn, the attestations' text) of ``bundle``: the times from the provenance beside it when
    its subject is ``engine_sha256`` and its byproduct ``bundle_sha256``, else None; the text when the file is there.
    No signature is checked here: ``pytest-trt attest verify`` does that."""
    path = a.attestation_path(bundle)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, None, None
    for line in text.splitlines():
        try:
            doc = json.loads(base64.b64decode(json.loads(line)["payload"]))
            if doc.get("predicateType") != a.PROVENANCE:
                continue
            run = doc["predicate"]["runDetails"]
            subject = doc["subject"][0]["digest"]["sha256"]
            made = run["byproducts"][0]["digest"]["sha256"]
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            continue
        if subject == engine_sha256 and made == bundle_sha256:
            meta = run.get("metadata") or {}
            return meta.get("startedOn"), meta.get("finishedOn"), text
    return None, None, text
