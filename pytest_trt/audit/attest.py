"""Attestations beside a bundle, in formats supply-chain tools read without pytest-trt.

``<bundle>.intoto.jsonl`` holds three DSSE envelopes, one per line, each over an
in-toto Statement v1 whose subject is the engine (its name and sha256):

1. SLSA Provenance v1: the pinned config and its hash, the ONNX model, calibration
   data, cache and Q/DQ model and the golden files as resolved dependencies; the
   builder (backend and version, pytest-trt, CUDA, device) and the build's start and
   finish times from the clock, which the bundle itself never holds;
2. in-toto Test Result v0.1: the golden checks bundled with the engine, their
   verdicts and metrics;
3. a CycloneDX 1.6 ML-BOM of the engine (also written alone as ``<bundle>.cdx.json``).

Statements are plain JSON (canonical, so the same build gives the same bytes)
checked against the ``in-toto-attestation`` library's Statement and predicate
types before they are written; the BOM is made with ``cyclonedx-python-lib``.  An
envelope is signed with the session's bundle key (Ed25519 or ECDSA P-256, both
deterministic) over DSSE's pre-authentication encoding; without a key its
``signatures`` list is empty.  The libraries (extra ``attest``) are imported only
here, when attestations are written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit.manifest import sha256_hex
from pytest_trt.errors import SigningUnavailable

if TYPE_CHECKING:
    from pytest_trt.audit.bundle import BundleInfo, BundleInputs

STATEMENT = "https://in-toto.io/Statement/v1"
PROVENANCE = "https://slsa.dev/provenance/v1"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
CYCLONEDX = "https://cyclonedx.org/bom"
#: the SLSA build type of a pytest-trt engine build (its parameters are described in docs/compliance.md)
BUILD_TYPE = "https://github.com/pytest-trt/pytest-trt/blob/main/docs/compliance.md#build-type"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
ATTESTATION_SUFFIX = ".intoto.jsonl"
BOM_SUFFIX = ".cdx.json"
#: the golden verdicts a test result counts as passed (``updated``: an approved refresh wrote the snapshot)
PASSED_VERDICTS = frozenset({"pass", "updated"})
_VERDICT_KEYS = frozenset({"config_hash", "verdict", "message", "test", "golden", "generation", "metrics",
                           "approver", "reason", "approval"})
INSTALL_HINT = "attestations need the 'attest' extra: pip install 'pytest-trt[attest]'"


def attestation_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + ATTESTATION_SUFFIX)


def bom_path(bundle: Path) -> Path:
    return bundle.with_name(bundle.name + BOM_SUFFIX)


@dataclass(frozen=True)
class AttestInfo:
    """Attestations written beside one bundle."""

    path: Path
    bom: Path
    count: int
    signed: bool
    algorithm: str | None  # of the signing key, None when unsigned
    keyid: str | None  # the DSSE keyid (securesystemslib's spelling), None when unsigned


def canonical(data: Any) -> bytes:
    """Sorted keys, compact separators, UTF-8: the statement's bytes (the DSSE payload)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def validate_statement(doc: Mapping[str, Any]) -> None:
    """Check ``doc`` with the in-toto attestation library: Statement v1 and, where it has one, the predicate's type.

    Raises ``ValueError`` saying what is wrong (the library's own message), ``ImportError`` without the library.
    """
    from google.protobuf import json_format
    from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
    from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement

    predicates: dict[str, Any] = {PROVENANCE: provenance_pb2.Provenance, TEST_RESULT: test_result_pb2.TestResult}
    try:
        pb = json_format.ParseDict(dict(doc), statement_pb2.Statement())
        Statement.copy_from_pb(pb).validate()
        kind = predicates.get(str(doc.get("predicateType")))
        if kind is not None:
            json_format.ParseDict(dict(doc["predicate"]), kind())
    except json_format.ParseError as exc:
        raise ValueError(str(exc)) from None
    predicate = doc.get("predicate") or {}
    if doc.get("predicateType") == PROVENANCE:
        definition, run = predicate.get("buildDefinition") or {}, predicate.get("runDetails") or {}
        missing = [f for f, v in (("buildDefinition.buildType", definition.get("buildType")),
                                  ("buildDefinition.externalParameters", definition.get("externalParameters")),
                                  ("runDetails.builder.id", (run.get("builder") or {}).get("id"))) if not v]
        if missing:
            raise ValueError(f"SLSA provenance lacks required field(s) {', '.join(missing)}")
    if doc.get("predicateType") == TEST_RESULT and predicate.get("result") not in ("PASSED", "WARNED", "FAILED"):
        raise ValueError(f"test result must be PASSED, WARNED or FAILED, not {predicate.get('result')!r}")


def _subject(info: BundleInfo) -> list[dict[str, Any]]:
    return [{"name": f"{info.path.name}/engine.plan", "digest": {"sha256": info.engine_sha256}}]


def _calibration_deps(inputs: BundleInputs) -> list[dict[str, Any]]:
    pinned = inputs.result.config.get("calibration") or {}
    deps = []
    if pinned.get("data_sha256"):
        deps.append({"name": "calibration data", "uri": str(pinned.get("data") or ""),
                     "digest": {"sha256": str(pinned["data_sha256"])}})
    if inputs.calibration_cache is not None:
        deps.append({"name": "calibration cache", "digest": {"sha256": sha256_hex(inputs.calibration_cache)}})
    if inputs.qdq_model_sha256:
        deps.append({"name": "Q/DQ model", "digest": {"sha256": inputs.qdq_model_sha256}})
    for d in deps:
        if not d.get("uri"):
            d.pop("uri", None)
    return deps


def _goldens(golden: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One resource per golden file the bundled checks compared with (name, generation), with the sha256 of its
    golden dataset where the verdict names it."""
    seen: dict[str, dict[str, Any]] = {}
    for verdict in golden.values():
        name = verdict.get("golden") if isinstance(verdict, Mapping) else None
        if isinstance(name, str) and name:
            seen[name] = {"name": name, "annotations": {"generation": verdict.get("generation")}}
            dataset = verdict.get("dataset_sha256")
            if isinstance(dataset, str) and dataset:
                seen[name]["digest"] = {"sha256": dataset}
                seen[name]["annotations"]["digest_of"] = "golden dataset"
    return [seen[k] for k in sorted(seen)]


def provenance(info: BundleInfo, inputs: BundleInputs) -> dict[str, Any]:
    """The SLSA Provenance v1 statement of the bundle's engine."""
    from pytest_trt.common.package import __version__

    result = inputs.result
    env = dict(inputs.environment)
    cuda = env.get("cuda") or {}
    clock = result.clock()
    metadata: dict[str, Any] = {}
    if clock is not None:
        metadata = {"startedOn": clock["started"], "finishedOn": clock["finished"]}
    onnx = {"name": "ONNX model", "uri": str(result.config.get("onnx") or ""), "digest": {"sha256": result.onnx_sha256}}
    builder_deps = [{"name": result.backend, "annotations": {"version": result.backend_version or "unknown"}}]
    for name in ("runtime", "driver", "driver_cuda", "cudnn"):
        if cuda.get(name):
            builder_deps.append({"name": f"cuda {name}", "annotations": {"version": str(cuda[name])}})
    for gpu in env.get("gpus") or []:
        builder_deps.append({"name": "gpu", "annotations": {k: v for k, v in gpu.items() if v is not None}})
    predicate = {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {"config": result.config, "config_hash": result.config_hash},
            "internalParameters": {
                "backend": result.backend, "device": result.device,
                "effective_config_sha256": sha256_hex(canonical(result.effective_config)),
                "clock": "build start and finish" if clock is not None else "not recorded for this build",
            },
            "resolvedDependencies": [onnx, *_calibration_deps(inputs), *_goldens(inputs.golden_results or {})],
        },
        "runDetails": {
            "builder": {
                "id": f"pkg:pypi/pytest-trt@{__version__}",
                "version": {"pytest-trt": __version__, result.backend: result.backend_version or "unknown",
                            "python": str((env.get("python") or {}).get("version") or "unknown")},
                "builderDependencies": builder_deps,
            },
            "metadata": metadata,
            "byproducts": [{"name": info.path.name, "digest": {"sha256": info.sha256}}],
        },
    }
    return {"_type": STATEMENT, "subject": _subject(info), "predicateType": PROVENANCE, "predicate": predicate}


def metrics_of(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The numbers of a golden verdict: its ``metrics`` mapping, else every number that is not a descriptive key."""
    nested = verdict.get("metrics")
    if isinstance(nested, Mapping):
        return dict(nested)
    return {k: v for k, v in verdict.items()
            if k not in _VERDICT_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool)}


def test_result(info: BundleInfo, inputs: BundleInputs) -> dict[str, Any]:
    """The in-toto Test Result statement of the golden checks bundled with the engine."""
    golden = dict(inputs.golden_results or {})
    passed = sorted(t for t, v in golden.items() if str(v.get("verdict")) in PASSED_VERDICTS)
    failed = sorted(t for t in golden if t not in passed)
    configuration = []
    for test in sorted(golden):
        v = golden[test]
        annotations = {"test": test, "verdict": str(v.get("verdict")), "metrics": metrics_of(v)}
        if v.get("generation") is not None:
            annotations["generation"] = v.get("generation")
        configuration.append({"name": str(v.get("golden") or test), "annotations": annotations})
    predicate: dict[str, Any] = {"result": "FAILED" if failed else "PASSED", "configuration": configuration,
                                 "passedTests": passed, "failedTests": failed, "warnedTests": []}
    return {"_type": STATEMENT, "subject": _subject(info), "predicateType": TEST_RESULT, "predicate": predicate}


def bom(info: BundleInfo, inputs: BundleInputs) -> dict[str, Any]:
    """The CycloneDX 1.6 ML-BOM of the engine, made with ``cyclonedx-python-lib`` (reproducible: fixed serial
    number, references and timestamp)."""
    from datetime import datetime, timezone

    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6

    from pytest_trt.common.package import __version__

    result = inputs.result

    def sha(hexdigest: str) -> list[HashType]:
        return [HashType(alg=HashAlgorithm.SHA_256, content=hexdigest)]

    engine = Component(type=ComponentType.MACHINE_LEARNING_MODEL, bom_ref="engine",
                       name=str(result.config.get("name") or "engine"), version=str(result.config.get("version") or ""),
                       hashes=sha(info.engine_sha256),
                       properties=[Property(name="pytest-trt:config_hash", value=result.config_hash),
                                   Property(name="pytest-trt:backend", value=result.backend),
                                   Property(name="pytest-trt:precision", value=str(result.config.get("precision"))),
                                   Property(name="pytest-trt:bundle", value=info.path.name),
                                   Property(name="pytest-trt:bundle_sha256", value=info.sha256)])
    deps = [Component(type=ComponentType.MACHINE_LEARNING_MODEL, bom_ref="onnx", name="ONNX model",
                      description=str(result.config.get("onnx") or ""), hashes=sha(result.onnx_sha256))]
    for i, dep in enumerate(_calibration_deps(inputs)):
        deps.append(Component(type=ComponentType.DATA, bom_ref=f"calibration-{i}", name=dep["name"],
                              hashes=sha(dep["digest"]["sha256"])))
    for i, ref in enumerate(_goldens(inputs.golden_results or {})):
        deps.append(Component(type=ComponentType.DATA, bom_ref=f"golden-{i}", name=ref["name"],
                              version=str(ref["annotations"].get("generation")),
                              hashes=sha(ref["digest"]["sha256"]) if "digest" in ref else []))
    deps.append(Component(type=ComponentType.LIBRARY, bom_ref="backend", name=result.backend,
                          version=result.backend_version or "unknown"))
    doc = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"pytest-trt:{info.sha256}"))
    clock = result.clock()
    stamp = clock["finished"] if clock is not None else "1970-01-01T00:00:00.000000Z"
    doc.metadata.timestamp = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    doc.metadata.component = engine
    doc.metadata.tools.components.add(Component(type=ComponentType.APPLICATION, bom_ref="pytest-trt",
                                                name="pytest-trt", version=__version__))
    for component in deps:
        doc.components.add(component)
    doc.register_dependency(engine, deps)
    text: str = JsonV1Dot6(doc).output_as_string(indent=None)
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def statements(info: BundleInfo, inputs: BundleInputs) -> list[dict[str, Any]]:
    """The three statements of the bundle ``info`` made from ``inputs``, each checked with the in-toto library."""
    made = [provenance(info, inputs), test_result(info, inputs)]
    made.append({"_type": STATEMENT, "subject": _subject(info), "predicateType": CYCLONEDX,
                 "predicate": bom(info, inputs)})
    for doc in made:
        validate_statement(doc)
    return made


@dataclass(frozen=True)
class Prepared:
    """Attestations made and signed in memory (:func:`prepare_attestations`), to be written by
    :func:`store_attestations`."""

    info: AttestInfo
    lines: bytes  # <bundle>.intoto.jsonl
    bom: bytes  # <bundle>.cdx.json


def prepare_attestations(info: BundleInfo, inputs: BundleInputs) -> Prepared:
    """The attestations of the bundle ``info`` made from ``inputs``: statements checked, envelopes signed."""
    try:
        made = statements(info, inputs)
    except ImportError as exc:
        raise SigningUnavailable(f"{INSTALL_HINT} ({exc})") from None
    from pytest_trt.audit.sign import dsse_envelopes

    envelopes, algorithm, key_id = dsse_envelopes(PAYLOAD_TYPE, [canonical(doc) for doc in made], inputs.sign_key)
    lines = b"".join(canonical(env) + b"\n" for env in envelopes)
    attested = AttestInfo(path=attestation_path(info.path), bom=bom_path(info.path), count=len(made),
                          signed=key_id is not None, algorithm=algorithm, keyid=key_id)
    return Prepared(attested, lines, canonical(made[-1]["predicate"]) + b"\n")


def write_attestations(info: BundleInfo, inputs: BundleInputs) -> AttestInfo:
    """Write ``<bundle>.intoto.jsonl`` (and ``<bundle>.cdx.json``) beside the bundle ``info``; atomic, read-only."""
    prepared = prepare_attestations(info, inputs)
    store_attestations(info, prepared)
    return prepared.info


def store_attestations(info: BundleInfo, prepared: Prepared, marker: dict[str, Any] | None = None) -> bool:
    """Write ``prepared`` beside the bundle ``info`` under the bundle's lock (atomic, read-only files) and record
    ``marker`` in the sidecar; nothing (False) when another writer replaced the bundle meanwhile (that writer
    attests its own)."""
    from pytest_trt.audit import sidecar
    from pytest_trt.audit.bundle import BUNDLE_FILE_MODE
    from pytest_trt.common.fileio import locked, write_bytes_atomic

    path = info.path
    with locked(path.parent / f".{path.name}.lock", what=f"audit bundle {path}"):
        state = sidecar.read_state(path)
        if state is not None and state.sha256 != info.sha256:
            return False
        # the ML-BOM alone is a copy of the attested one (attest verify compares them): not fsynced, a power cut
        # may lose it; the attestations are evidence, fsynced like the bundle
        write_bytes_atomic(prepared.info.bom, prepared.bom, mode=BUNDLE_FILE_MODE, fsync=False)
        write_bytes_atomic(prepared.info.path, prepared.lines, mode=BUNDLE_FILE_MODE)
        if state is not None and marker is not None:
            sidecar.write_state(path, members_sha256=state.members_sha256, sha256=state.sha256, size=state.size,
                                engine_sha256=state.engine_sha256, golden=state.golden,
                                inputs_sha256=state.inputs_sha256, attested=marker)
    return True
