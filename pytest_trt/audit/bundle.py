"""Write audit bundles: one deterministic ``tar.gz`` per engine.

Members (flat names; see :func:`bundle_members`), made from one :class:`BundleInputs`::

    engine.plan          the serialized engine, or, with ``trt_bundle_engine = false``,
    engine.plan.sha256   its sha256 only (``sha256sum`` format)
    build.log.gz         the raw builder log, unchanged, gzip-compressed without timestamp
    build.json           bundle schema, build metadata (versions, device, durations,
                         hashes, log index) and the BuildRecord
    config.json          pinned and effective config, config hash, ONNX sha256
    environment.json     see :mod:`pytest_trt.audit.environment`
    calibration.cache    INT8 calibration cache, when the build used one
    calibration.json     its sha256 and the Q/DQ model's sha256, when present
    golden.json          golden check results, keyed by test id, when given
    MANIFEST.sha256      sha256 of every member above (``sha256sum -c`` format)
    MANIFEST.sha256.sig  Ed25519 signature of the manifest, when a key is configured

The bytes are a pure function of the arguments: no clock is read, JSON is
written with sorted keys, and the archive is deterministic
(:mod:`pytest_trt.audit.archive`).  Writing the same build twice therefore
gives the same file, and two pytest-xdist workers racing on one bundle
write the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex
from pytest_trt.audit.profiles import normalized_effective
from pytest_trt.audit.sign import SIGNATURE, sign_manifest
from pytest_trt.backends import registry
from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.fileio import remove_dead_temporaries, write_atomic

if TYPE_CHECKING:
    from pytest_trt.artifact import BuildMembers, BuildResult
    from pytest_trt.buildlog.record import BuildRecord

BUNDLE_SCHEMA = 1
#: bump when the bundle writer's output changes for the same inputs (see :func:`inputs_digest`)
INPUTS_SCHEMA = 1
ENGINE = "engine.plan"
ENGINE_HASH = "engine.plan.sha256"
LOG = "build.log.gz"
BUILD = "build.json"
CONFIG = "config.json"
ENVIRONMENT = "environment.json"
CALIBRATION_CACHE = "calibration.cache"
CALIBRATION = "calibration.json"
GOLDEN = "golden.json"
#: bundles are evidence: written read-only, in a folder only the owner (and group) can read
BUNDLE_FILE_MODE = 0o444
BUNDLE_DIR_MODE = 0o750
#: the bundle folder's subfolder where a bundle is written before it is renamed into place
STAGING_FOLDER = ".writing"
#: members every bundle has (plus one of ENGINE / ENGINE_HASH)
REQUIRED = (BUILD, CONFIG, ENVIRONMENT, LOG, MANIFEST)
KNOWN = frozenset(REQUIRED + (ENGINE, ENGINE_HASH, CALIBRATION_CACHE, CALIBRATION, GOLDEN, SIGNATURE))

#: engines from this size have their CRC-32 computed on a thread (zlib releases the GIL above 5 KiB)
_CRC_ON_THREAD = 1 << 20
#: how long the writer waits for its prep thread to begin: ~0.1 ms with a free core; with none, not 4 ms
_PREP_START_WAIT_S = 0.001
_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "quadro"}


@dataclass(frozen=True)
class BundleInfo:
    """A bundle on disk: where, its file sha256 and size, and what it holds."""

    path: Path
    sha256: str
    size: int
    config_hash: str
    engine_sha256: str
    backend_version: str


def canonical_json(data: Any) -> bytes:
    """Sorted keys, compact separators, one final newline: the only accepted spelling.

    Compact rather than indented because ``indent`` switches ``json`` to its
    pure-Python encoder, which made writing build.json (record plus log
    index) most of the bundle's cost; ``pytest-trt bundle show`` is the
    readable view.
    """
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    if "\\u" in text:  # non-ASCII text (or an escape that looks alike): spelled as UTF-8, the canonical form
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # else the same bytes: without a non-ASCII character both spellings are equal, and ASCII encodes 3x faster
    return (text + "\n").encode("utf-8")


def backend_version(result: BuildResult) -> str:
    """The backend library version a build used (``"unknown"`` when the result lacks it).

    A result read from an older cache entry has it from :func:`pytest_trt.common.backend_version.backend_version_of`.
    """
    return result.backend_version or "unknown"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "unknown"


def device_slug(device: Mapping[str, Any]) -> str:
    """``h200`` for ``NVIDIA H200``; ``cpu-aot-sm89-sm120`` for an RTX ahead-of-time build; ``cpu``."""
    kind = str(device.get("kind") or "cpu")
    if kind == "gpu" and device.get("name"):
        words = [w for w in re.split(r"\s+", str(device["name"]).lower()) if w not in _VENDOR_WORDS]
        return _slug("".join(words) if len(words) <= 2 else "-".join(words))
    if kind == "cpu-aot":
        targets = device.get("targets") or device.get("compute_capabilities") or []
        # "default" means "the builder's default targets": nothing to add to the name
        return "-".join(["cpu-aot", *(_slug(str(t)) for t in targets if str(t) != "default")])
    return _slug(kind)


def bundle_name(result: BuildResult) -> str:
    """``<name>-v<version>-<backend><major.minor>-<device>.tar.gz``."""
    major_minor = ".".join(backend_version(result).split(".")[:2])
    prefix = registry.slug(result.backend) or _slug(result.backend)
    # BuildConfig already restricts name and version to [A-Za-z0-9_.+-]; keep them as written
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(result.config.get("name") or "engine"))
    version = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(result.config.get("version") or "0"))
    return f"{name}-v{version}-{prefix}{major_minor}-{device_slug(result.device)}.tar.gz"


@dataclass(frozen=True)
class BundleInputs:
    """Everything a bundle's members are made from, gathered once (by the recorder, or a caller of
    :func:`write_bundle`); the build's own part is handed over by :meth:`BuildResult.members`."""

    result: BuildResult
    record: BuildRecord | None
    environment: Mapping[str, Any]
    include_engine: bool = True
    golden_results: Mapping[str, Any] | None = None
    calibration_cache: bytes | None = None
    qdq_model_sha256: str | None = None
    sign_key: Path | None = None


def build_member(build: BuildMembers, *, record: BuildRecord | None, include_engine: bool) -> bytes:
    """``build.json``: canonical JSON of the bundle schema, the build (the cache entry's build.json) and the record.

    The build's part is the cache entry's build.json bytes, made once per result
    (:meth:`~pytest_trt.artifact.BuildResult.build_json_bytes`), set into the text: ``"build"`` sorts
    first, and a canonical object's text is its members' canonical texts in key order.  When either
    part holds an escaped character, the whole is encoded here instead (canonical JSON spells
    non-ASCII text as UTF-8, which the escaped ASCII spelling of the parts is not).
    """
    head = {"bundle_schema": BUNDLE_SCHEMA, "engine_included": include_engine,
            "record": record.to_dict() if record is not None else None}
    rest = canonical_json(head)
    if b"\\u" in build.build_json or b"\\u" in rest or not build.build_json.endswith(b"}\n"):
        return canonical_json({**head, "build": json.loads(build.build_json)})
    return b'{"build":' + build.build_json[:-1] + b"," + rest[1:]


def bundle_members(inputs: BundleInputs | BuildResult, *, log_gz: Callable[[], bytes] | None = None,
                   **fields: Any) -> dict[str, bytes]:
    """Every member of the bundle of ``inputs``, name -> bytes, manifest and signature included.

    ``inputs``: a :class:`BundleInputs`, or a build result with its other fields as keywords.
    ``log_gz``: returns ``build.log.gz``, called once the other members are made (the writer
    gzips the log on another core meanwhile).
    """
    if not isinstance(inputs, BundleInputs):
        inputs = BundleInputs(inputs, **fields)
    # a fresh build's engine is the builder's buffer in the writer (no copy); bytes here, as documented
    return {name: bytes(data) for name, data in _members(inputs, inputs.result.members(), log_gz).items()}


def _members(inputs: BundleInputs, build: BuildMembers,
             log_gz: Callable[[], bytes] | None) -> dict[str, bytes | memoryview]:
    from pytest_trt.audit.archive import gzip_bytes  # with tarfile and gzip: not on a cache hit's path

    members: dict[str, bytes | memoryview] = {}
    engine_sha = build.engine_sha256
    if inputs.include_engine:
        members[ENGINE] = build.engine
    else:
        members[ENGINE_HASH] = f"{engine_sha}  {ENGINE}\n".encode("ascii")
    members[BUILD] = build_member(build, record=inputs.record, include_engine=inputs.include_engine)
    members[CONFIG] = canonical_json({"pinned": build.pinned, "effective": normalized_effective(build.effective),
                                      "config_hash": build.config_hash, "onnx_sha256": build.onnx_sha256})
    members[ENVIRONMENT] = canonical_json(dict(inputs.environment))
    calibration_cache, qdq_model_sha256 = inputs.calibration_cache, inputs.qdq_model_sha256
    if calibration_cache is not None or qdq_model_sha256 is not None:
        calib: dict[str, Any] = {"cache_sha256": None, "qdq_model_sha256": qdq_model_sha256}
        if calibration_cache is not None:
            members[CALIBRATION_CACHE] = calibration_cache
            calib["cache_sha256"] = sha256_hex(calibration_cache)
        members[CALIBRATION] = canonical_json(calib)
    golden_results = inputs.golden_results
    if golden_results:
        members[GOLDEN] = canonical_json({"schema": 1, "checks": dict(golden_results)})
    members[LOG] = gzip_bytes(build.log) if log_gz is None else log_gz()
    # the engine's hash is known: hashing a 14.5 MB engine again costs 7 ms per bundle
    manifest = render_manifest({name: engine_sha if name == ENGINE else sha256_hex(data)
                                for name, data in members.items()})
    members[MANIFEST] = manifest
    if inputs.sign_key is not None:
        members[SIGNATURE] = sign_manifest(manifest, inputs.sign_key)
    return members


def inputs_digest(
    *,
    bundle: str,
    result_identity: str,
    environment_sha256: str,
    include_engine: bool,
    golden: dict[str, Any] | None,
    calibration_cache_sha256: str | None,
    qdq_model_sha256: str | None,
    sign_key_sha256: str | None,
) -> str:
    """sha256 of everything a bundle's bytes are a function of, computed without building one member.

    ``result_identity`` names the build result's exact content (the engine cache entry's file
    hashes); the record is parsed from its log by this pytest-trt version, whose version and
    schemas are part of the digest, and the signature is deterministic (Ed25519) for a given key.
    """
    from pytest_trt.common.package import __version__

    material = {
        "schema": [INPUTS_SCHEMA, BUNDLE_SCHEMA], "pytest_trt": __version__, "bundle": bundle,
        "result": result_identity, "environment": environment_sha256, "include_engine": include_engine,
        "golden": golden or None, "calibration_cache": calibration_cache_sha256, "qdq_model": qdq_model_sha256,
        "sign_key": sign_key_sha256,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def write_bundle(
    inputs: BundleInputs | BuildResult,
    out_dir: Path,
    *,
    name: str | None = None,
    reuse: bool = False,
    inputs_sha256: str | None = None,
    **fields: Any,
) -> BundleInfo:
    """Write the bundle of ``inputs`` atomically into ``out_dir``; return where and its sha256.

    ``inputs``: a :class:`BundleInputs`, or a build result with its other fields as keywords.  With
    ``reuse``, a bundle whose sidecar (:mod:`pytest_trt.audit.sidecar`) shows, for the unchanged
    file on disk, the same ``inputs_sha256`` (:func:`inputs_digest`) is kept without building any
    member; failing that, one with the same manifest is kept (same members, same bytes).
    """
    from pytest_trt.audit import sidecar

    if not isinstance(inputs, BundleInputs):
        inputs = BundleInputs(inputs, **fields)
    result = inputs.result
    path = Path(out_dir) / (name or bundle_name(result))
    state = sidecar.read_state(path) if reuse else None
    if state is not None and inputs_sha256 is not None and state.inputs_sha256 == inputs_sha256:
        return _info(path, state.sha256, state.size, result)
    golden = dict(inputs.golden_results) if inputs.golden_results else None
    build = result.members()
    # a bundle will be written (none on disk, or one of another engine or other golden verdicts): the log's gzip and
    # the engine's CRC-32 (the stored gzip member's trailer), both GIL-free zlib calls, run on other cores while
    # the JSON members are encoded; otherwise (a cache hit's first session) the members are likely the same
    will_write = state is None or state.engine_sha256 != build.engine_sha256 or (state.golden or None) != golden
    crc: Future[int] | None = None
    log_gz: Future[bytes] | None = None
    if will_write and inputs.include_engine and len(build.engine) >= _CRC_ON_THREAD:
        from pytest_trt.audit.archive import gzip_bytes

        log, engine_bytes = build.log, build.engine
        log_gz, crc = Future(), Future()  # the log first: its member is needed first
        on_thread("pytest-trt-bundle-prep", (log_gz, lambda: gzip_bytes(log)), (crc, lambda: zlib.crc32(engine_bytes)),
                   wait_start=_PREP_START_WAIT_S)
    members = _members(inputs, build, log_gz.result if log_gz is not None else None)
    digest = sidecar.members_digest(members[MANIFEST], members.get(SIGNATURE))
    if state is not None and state.members_sha256 == digest:
        if inputs_sha256 is not None:  # same bytes from other inputs (or a fresh build): remember these inputs
            sidecar.write_state(path, members_sha256=digest, sha256=state.sha256, size=state.size,
                                engine_sha256=result.engine_sha256, golden=golden, inputs_sha256=inputs_sha256,
                                attested=state.attested)
        return _info(path, state.sha256, state.size, result)
    # mode applies when the folder is created here; an existing folder keeps its mode
    path.parent.mkdir(parents=True, exist_ok=True, mode=BUNDLE_DIR_MODE)
    engine = members.get(ENGINE)
    # the CRC is waited for only when the stored member's trailer is written (or hashed), near the file's end
    known_crc = {ENGINE: crc.result} if crc is not None and engine is build.engine else None
    hashed: list[tuple[int, Future[str]]] = []

    def writer(fh: Any) -> None:
        from pytest_trt.audit import gathered
        from pytest_trt.audit.archive import write_tar_gz

        out = gathered.Gathered()  # the archive as a list of buffers: the engine's blocks are views of its bytes
        write_tar_gz(members, out, crc32=known_crc)
        # the file's sha256 on another core while the buffers are written and fsynced (both release the GIL)
        sha256: Future[str] = Future()
        hashed.append((out.size, sha256))
        on_thread("pytest-trt-bundle-sha256", (sha256, lambda: gathered.sha256_of(out.chunks)))
        fh.flush()
        gathered.write_buffers(fh.fileno(), out.chunks)

    staging = path.parent / STAGING_FOLDER  # listed for a killed writer's file: the bundle folder is years of files
    remove_dead_temporaries(path, staging=staging)  # what writers of this bundle killed before their rename left
    # replacing a 0444 bundle is allowed: os.replace needs write permission on the folder, not the file
    try:
        write_atomic(path, writer, mode=BUNDLE_FILE_MODE, staging=staging)
    finally:
        file_sha256 = hashed[0][1].result() if hashed else ""  # joins the hashing thread whatever happened
    info = _info(path, file_sha256, hashed[0][0], result)
    sidecar.write_state(path, members_sha256=digest, sha256=info.sha256, size=info.size,
                        engine_sha256=info.engine_sha256, golden=golden, inputs_sha256=inputs_sha256)
    return info


def _info(path: Path, sha256: str, size: int, result: BuildResult) -> BundleInfo:
    return BundleInfo(path=path, sha256=sha256, size=size, config_hash=result.config_hash,
                      engine_sha256=result.engine_sha256, backend_version=backend_version(result))
