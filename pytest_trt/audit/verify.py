"""Verify an audit bundle: member safety, manifest hashes, signature, canonical bytes, schema.

Nothing is ever extracted to disk.  The archive is read once with bounded
memory (:mod:`pytest_trt.audit.tarscan`: headers and declared sizes checked
before any data is decompressed; the engine is only hashed), and every failure
is a :class:`~pytest_trt.errors.BundleIntegrityError` naming the bundle and,
where one is to blame, the member.

Order matters: hashes, then the signature, then the file's bytes against the
writer's canonical output, and only then is any member's JSON parsed, so a
signed bundle edited by hand fails as "signature does not match" and no
parser ever sees bytes nobody vouched for.  Any change to a member's bytes
fails the manifest check; a change to the manifest fails its own form check,
the hash of a member it names, or the signature; and since the writer is
deterministic, a change anywhere else in the file (gzip header, compressed
stream, tar headers) fails the canonical-bytes check: every single-byte
change of a bundle is detected.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit import bundle as b
from pytest_trt.audit import schema
from pytest_trt.audit.manifest import MANIFEST, parse_manifest
from pytest_trt.audit.sign import SIGNATURE, parse_signature, verify_manifest_signature
from pytest_trt.audit.tarscan import Scan, scan
from pytest_trt.errors import ArchiveError, BundleIntegrityError, KeyFileError, SchemaError, UnsafeMember

if TYPE_CHECKING:
    from pytest_trt.buildlog.record import BuildRecord

_JSON_MEMBERS = (b.BUILD, b.CONFIG, b.ENVIRONMENT, b.CALIBRATION, b.GOLDEN)
_MiB = 1 << 20
#: largest accepted size per member, checked from the tar header before decompressing; every member but the
#: engine is held in memory, so these bound the verifier's memory (about 170 MiB of members at most).  Sized from
#: what the writer produces, with margin: the bundles of a 224x224 MobileNetV2 (benchmarks/models.py, 1000
#: classes, a check of 256 labelled images in 8 tags) hold build.json 162 KB (TensorRT-RTX 1.7; 61 KB ONNX
#: Runtime), golden.json 5.3 KB per check, environment.json 3.3 KB, config.json 0.9 KB and a 264 KB build log
#: (26 KB gzipped); the largest real verbose log here, TensorRT 8.6 trtexec on SegFormer (246 layers), is 2.2 MB
#: (217 KB gzipped, 19,219 messages).  build.json grows with the log (its log index holds about 35 bytes per
#: builder message), the others with the suite.
MEMBER_LIMITS = {
    b.ENGINE: 1 << 40,  # streamed and hashed, never held
    b.LOG: 64 * _MiB,  # gzip: MAX_LOG_BYTES of text at the 6-14x ratio measured on real logs
    b.BUILD: 64 * _MiB,  # about 1.8 M builder messages (90x the SegFormer log), with the record
    b.CONFIG: _MiB,  # 1,000x the measured
    b.ENVIRONMENT: 4 * _MiB,  # 1,000x the measured; a pip freeze of 10,000 packages is about 400 KB
    b.CALIBRATION_CACHE: 16 * _MiB,  # one text line of about 30 bytes per tensor: 500,000 tensors
    b.CALIBRATION: _MiB,
    b.GOLDEN: 16 * _MiB,  # 3,000 checks of the measured size
    b.ENGINE_HASH: 1024,
    MANIFEST: 64 * 1024,
    SIGNATURE: 64 * 1024,
}
#: most JSON values and keys accepted in a member, counted in one pass over its bytes before it is parsed
#: (:func:`json_values`): a member within its byte limit can still hold tens of millions of tiny values, which
#: parse to gigabytes.  Measured on the bundles above: build.json 18,300 (TensorRT-RTX; its log index is 4 per
#: builder message, so the limit admits about 1 M messages, 50x the SegFormer log), golden.json 610 per check
#: (1,000 with 100-class confusion counts), environment.json 211, config.json 111.
JSON_VALUE_LIMITS = {
    b.BUILD: 4_000_000,
    b.GOLDEN: 1_000_000,  # 1,600 checks, or 25 outputs with all 10,000 cells of 100-class confusion counts
    b.ENVIRONMENT: 200_000,
    b.CONFIG: 50_000,
    b.CALIBRATION: 50_000,
}
#: deepest JSON nesting accepted in a member (pytest-trt writes at most about 8 levels)
MAX_JSON_DEPTH = 64
#: largest accepted build log, decompressed (checked while streaming; never held whole by the verifier): twice the
#: text whose log index build.json's value limit admits, 120x the SegFormer log
MAX_LOG_BYTES = 256 * _MiB
#: a log may inflate past LOG_RATIO_FREE_BYTES only at this many bytes per compressed byte: real logs gzip 6-14x,
#: a decompression bomb of repeated bytes about 1,000x, so a bomb stops after a fraction of a second
MAX_LOG_RATIO = 100
LOG_RATIO_FREE_BYTES = 64 * _MiB
_SCHEMA_CHECKS = {
    b.BUILD: schema.check_build,
    b.CONFIG: schema.check_config,
    b.ENVIRONMENT: schema.check_environment,
    b.CALIBRATION: schema.check_calibration,
    b.GOLDEN: schema.check_golden,
}


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed :func:`verify_bundle`, with its small members in memory."""

    path: Path
    sha256: str  # of the tar.gz file
    members: Mapping[str, bytes]  # every member except engine.plan
    member_sha256: Mapping[str, str]
    engine_size: int | None  # None when only the engine's hash is bundled
    signer: str | None = None  # public key sha256, when the signature was checked
    signed: bool = False
    docs: Mapping[str, Any] = field(default_factory=dict)  # parsed JSON members

    @property
    def build(self) -> dict[str, Any]:
        return dict(self.docs[b.BUILD])

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.docs[b.CONFIG])

    @property
    def environment(self) -> dict[str, Any]:
        return dict(self.docs[b.ENVIRONMENT])

    @property
    def golden(self) -> dict[str, Any] | None:
        doc = self.docs.get(b.GOLDEN)
        return dict(doc["checks"]) if doc else None

    @property
    def engine_sha256(self) -> str:
        return str(self.build["build"]["engine_sha256"])

    def log_text(self) -> str:
        return b"".join(_inflate(self.members[b.LOG])).decode("utf-8")

    def record(self) -> BuildRecord | None:
        from pytest_trt.buildlog.record import BuildRecord

        data = self.build.get("record")
        return BuildRecord.from_dict(data) if data is not None else None


def _fail(path: Path, message: str, member: str | None = None) -> BundleIntegrityError:
    where = f"{path}: member {member}: " if member else f"{path}: "
    return BundleIntegrityError(where + message, bundle=str(path), member=member)


def log_limit(compressed: int) -> int:
    """The most bytes the first ``compressed`` gzip bytes of a build log may inflate to."""
    return min(MAX_LOG_BYTES, LOG_RATIO_FREE_BYTES + MAX_LOG_RATIO * compressed)


def _inflate(data: bytes, limit: int | None = None, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Decompress gzip ``data`` in chunks; ``ValueError`` past ``limit`` bytes (default: :func:`log_limit` of the
    compressed bytes read so far, so a bomb stops early), ``zlib.error`` when corrupt."""
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    total, pending = 0, data
    while True:
        out = d.decompress(pending, chunk)
        pending = d.unconsumed_tail
        total += len(out)
        cap = log_limit(len(data) - len(pending)) if limit is None else limit
        if total > cap:
            raise ValueError(f"decompresses to more than {cap:,} bytes, the most accepted for a log "
                             f"(at most {MAX_LOG_BYTES:,}, and past {LOG_RATIO_FREE_BYTES:,} at most "
                             f"{MAX_LOG_RATIO} bytes per compressed byte: real logs gzip 6-14x); a decompression "
                             "bomb or not a pytest-trt log")
        if out:
            yield out
        if d.eof:
            if d.unused_data:
                raise ValueError("data after the end of the gzip stream")
            return
        if not out and not pending:
            raise ValueError("truncated gzip stream")


def _read(path: Path) -> tuple[dict[str, bytes], dict[str, str], int | None, Scan]:
    try:
        found = scan(path, max_size=lambda name: MEMBER_LIMITS.get(name, -1), keep=lambda name: name != b.ENGINE)
    except UnsafeMember as exc:
        raise _fail(path, f"unsafe tar member refused ({exc.why}); nothing was extracted", exc.member) from None
    except ArchiveError as exc:
        raise _fail(path, str(exc)) from None
    except OSError as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise
        raise _fail(path, f"not a readable tar.gz archive ({exc})") from None
    return found.members, found.sha256, found.sizes.get(b.ENGINE), found


def _check_manifest(path: Path, members: dict[str, bytes], hashes: dict[str, str]) -> None:
    if MANIFEST not in members:
        raise _fail(path, "has no MANIFEST.sha256", MANIFEST)
    try:
        listed = parse_manifest(members[MANIFEST])
    except ValueError as exc:
        raise _fail(path, str(exc), MANIFEST) from None
    for name, digest in listed.items():
        if name not in hashes:
            raise _fail(path, f"lists {name!r}, which is missing from the archive", MANIFEST)
        if hashes[name] != digest:
            raise _fail(path, f"sha256 mismatch: manifest {digest}, actual {hashes[name]}", name)
    for name in hashes:
        if name not in listed and name not in (MANIFEST, SIGNATURE):
            raise _fail(path, "present in the archive but not listed in MANIFEST.sha256", name)


def _check_signature(path: Path, members: dict[str, bytes], public_key: Path | None) -> str | None:
    signed = SIGNATURE in members
    if signed:
        try:
            parse_signature(members[SIGNATURE])
        except ValueError as exc:
            raise _fail(path, str(exc), SIGNATURE) from None
    if public_key is None:
        return None
    if not signed:
        raise _fail(path, "is not signed, but a public key was given to check it", SIGNATURE)
    try:
        return verify_manifest_signature(members[MANIFEST], members[SIGNATURE], public_key)
    except KeyFileError:
        raise
    except ValueError as exc:
        raise _fail(path, str(exc), SIGNATURE) from None


def _check_canonical(path: Path, found: Scan) -> None:
    if list(found.order) != sorted(found.order):
        raise _fail(path, "members are not in the writer's sorted order: the archive was rebuilt by another tool")
    if not found.canonical:
        raise _fail(
            path,
            f"the file differs from byte {found.first_difference:,} on from the deterministic archive of its own "
            "(verified) members: the gzip or tar framing was changed after writing",
        )


def json_values(data: bytes) -> int:
    """An upper bound of the JSON values and object keys in ``data``, counted without parsing: every one but the
    first follows a comma, a colon or the opening of a container."""
    return 1 + data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{")


def _json(path: Path, name: str, data: bytes) -> dict[str, Any]:
    budget = JSON_VALUE_LIMITS[name]
    if len(data) > budget and (count := json_values(data)) > budget:
        raise _fail(path, f"holds up to {count:,} JSON values, more than the {budget:,} accepted for it "
                    "(sized from what pytest-trt writes, with margin); refused before parsing", name)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _fail(path, f"is not UTF-8 JSON ({exc})", name) from None
    if not isinstance(doc, dict) or b.canonical_json(doc) != data:
        raise _fail(path, "is not a canonical JSON object", name)
    if _depth(data, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise _fail(path, f"nests deeper than {MAX_JSON_DEPTH} levels (readers recurse over it)", name)
    try:
        _SCHEMA_CHECKS[name](doc)
    except SchemaError as exc:
        raise _fail(path, f"wrong schema: {exc}", name) from None
    return doc


#: an escape inside a JSON string; a JSON string once escapes are gone; an innermost empty container
_JSON_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_JSON_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_QUOTE_OR_BRACKET = bytes(c for c in range(256) if c not in b'"[]{}')


def _depth(data: bytes, limit: int) -> int:
    """Nesting depth of the containers of the JSON text ``data`` (valid JSON), counted on its bytes: escapes are
    removed (a backslash occurs only inside strings), then everything but quotes and brackets, then the strings;
    each pass then removes the innermost containers; stops past ``limit``."""
    if b"\\" in data:
        data = _JSON_ESCAPE.sub(b"", data)
    brackets = _JSON_STRING.sub(b"", data.translate(None, _NOT_QUOTE_OR_BRACKET))
    depth = 0
    while brackets and depth <= limit:
        brackets = _INNERMOST.sub(b"", brackets)
        depth += 1
    return depth


def _check_log(path: Path, data: bytes) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for block in _inflate(data):
            decoder.decode(block)
        decoder.decode(b"", final=True)
    except (zlib.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise _fail(path, f"does not decompress to UTF-8 text ({exc})", b.LOG) from None


def _check_schema(
    path: Path, members: dict[str, bytes], hashes: dict[str, str]
) -> dict[str, Any]:
    for name in hashes:
        if name not in b.KNOWN:
            raise _fail(path, "unknown member for bundle schema 1", name)
    for name in b.REQUIRED:
        if name not in hashes:
            raise _fail(path, "required member is missing", name)
    if (b.ENGINE in hashes) == (b.ENGINE_HASH in hashes):
        raise _fail(path, f"exactly one of {b.ENGINE} and {b.ENGINE_HASH} must be present", b.ENGINE)
    docs = {name: _json(path, name, members[name]) for name in _JSON_MEMBERS if name in members}
    build = docs[b.BUILD]
    if build["bundle_schema"] > b.BUNDLE_SCHEMA:
        raise _fail(path, f"bundle_schema {build['bundle_schema']!r} is not one this pytest-trt reads "
                    f"(<= {b.BUNDLE_SCHEMA})", b.BUILD)
    meta = build["build"]
    if b.ENGINE in hashes:
        engine_sha = hashes[b.ENGINE]
    else:
        line = members[b.ENGINE_HASH].decode("ascii", "replace")
        engine_sha = line[:64]
        if line != f"{engine_sha}  {b.ENGINE}\n":
            raise _fail(path, "is not '<sha256>  engine.plan'", b.ENGINE_HASH)
    if meta["engine_sha256"] != engine_sha:
        raise _fail(path, f"engine sha256 {meta['engine_sha256']} does not match the engine ({engine_sha})", b.BUILD)
    if docs[b.CONFIG]["config_hash"] != meta["config_hash"]:
        raise _fail(path, "config_hash differs from build.json", b.CONFIG)
    _check_log(path, members[b.LOG])
    calib = docs.get(b.CALIBRATION)
    if (b.CALIBRATION_CACHE in hashes) and (calib is None or calib.get("cache_sha256") != hashes[b.CALIBRATION_CACHE]):
        raise _fail(path, "calibration.json does not hold the cache's sha256", b.CALIBRATION_CACHE)
    if build.get("record") is not None:
        from pytest_trt.buildlog.record import BuildRecord

        try:
            BuildRecord.from_dict(build["record"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(path, f"record is not a valid BuildRecord ({exc})", b.BUILD) from None
    return docs


def verify_bundle(path: Path, *, public_key: Path | None = None) -> VerifiedBundle:
    """Check ``path`` completely; with ``public_key``, the bundle must also carry a valid signature.

    Raises :class:`BundleIntegrityError` on any problem, ``FileNotFoundError``
    when there is no file, and, for a bad key file or a missing
    ``cryptography``, :class:`~pytest_trt.audit.sign.KeyFileError` /
    :class:`~pytest_trt.audit.sign.SigningUnavailable`.
    """
    path = Path(path)
    members, hashes, engine_size, found = _read(path)
    _check_manifest(path, members, hashes)
    signer = _check_signature(path, members, public_key)  # before any member's JSON is parsed
    _check_canonical(path, found)
    docs = _check_schema(path, members, hashes)
    return VerifiedBundle(
        path=path,
        sha256=found.file_sha256,
        members=members,
        member_sha256=hashes,
        engine_size=engine_size,
        signer=signer,
        signed=SIGNATURE in members,
        docs=docs,
    )
