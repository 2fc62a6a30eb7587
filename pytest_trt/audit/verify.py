"""Verify an audit bundle: member safety, manifest hashes, schema, signature.

Nothing is ever extracted to disk.  Every member is read in memory (the
engine is only hashed), and every failure is a
:class:`~pytest_trt.errors.BundleIntegrityError` naming the bundle and, where
one is to blame, the member.  Any change to a member's bytes fails at least
the manifest check; a change to the manifest fails its own form check or the
hash of the member it names, and, for signed bundles checked with a public
key, the signature.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.audit import bundle as b
from pytest_trt.audit.archive import UnsafeMember, iter_members
from pytest_trt.audit.manifest import MANIFEST, parse_manifest
from pytest_trt.audit.sign import SIGNATURE, KeyFileError, parse_signature, verify_manifest_signature
from pytest_trt.errors import BundleIntegrityError

if TYPE_CHECKING:
    from pytest_trt.buildlog.record import BuildRecord

_JSON_MEMBERS = (b.BUILD, b.CONFIG, b.ENVIRONMENT, b.CALIBRATION, b.GOLDEN)


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
        return gzip.decompress(self.members[b.LOG]).decode("utf-8")

    def record(self) -> BuildRecord | None:
        from pytest_trt.buildlog.record import BuildRecord

        data = self.build.get("record")
        return BuildRecord.from_dict(data) if data is not None else None


def _fail(path: Path, message: str, member: str | None = None) -> BundleIntegrityError:
    where = f"{path}: member {member}: " if member else f"{path}: "
    return BundleIntegrityError(where + message, bundle=str(path), member=member)


def _read(path: Path) -> tuple[dict[str, bytes], dict[str, str], int | None]:
    members: dict[str, bytes] = {}
    hashes: dict[str, str] = {}
    engine_size: int | None = None
    try:
        for name, chunks in iter_members(path):
            h = hashlib.sha256()
            if name == b.ENGINE:
                engine_size = 0
                for block in chunks:
                    h.update(block)
                    engine_size += len(block)
            else:
                data = b"".join(chunks)
                h.update(data)
                members[name] = data
            hashes[name] = h.hexdigest()
    except UnsafeMember as exc:
        raise _fail(path, f"unsafe tar member refused ({exc.why}); nothing was extracted", exc.member) from None
    except (tarfile.TarError, gzip.BadGzipFile, EOFError, zlib.error, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _fail(path, f"not a readable tar.gz archive ({exc})") from None
    return members, hashes, engine_size


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


def _json(path: Path, name: str, data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(path, f"is not UTF-8 JSON ({exc})", name) from None
    if not isinstance(doc, dict) or b.canonical_json(doc) != data:
        raise _fail(path, "is not a canonical JSON object", name)
    return doc


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
    schema = build.get("bundle_schema")
    if not isinstance(schema, int) or schema > b.BUNDLE_SCHEMA:
        raise _fail(path, f"bundle_schema {schema!r} is not one this pytest-trt reads (<= {b.BUNDLE_SCHEMA})",
                    b.BUILD)
    meta = build.get("build") or {}
    if b.ENGINE in hashes:
        engine_sha = hashes[b.ENGINE]
    else:
        line = members[b.ENGINE_HASH].decode("ascii", "replace")
        engine_sha = line[:64]
        if line != f"{engine_sha}  {b.ENGINE}\n":
            raise _fail(path, "is not '<sha256>  engine.plan'", b.ENGINE_HASH)
    if meta.get("engine_sha256") != engine_sha:
        recorded = meta.get("engine_sha256")
        raise _fail(path, f"engine sha256 {recorded} does not match the engine ({engine_sha})", b.BUILD)
    if docs[b.CONFIG].get("config_hash") != meta.get("config_hash"):
        raise _fail(path, "config_hash differs from build.json", b.CONFIG)
    try:
        gzip.decompress(members[b.LOG]).decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise _fail(path, f"does not decompress to UTF-8 text ({exc})", b.LOG) from None
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
    members, hashes, engine_size = _read(path)
    _check_manifest(path, members, hashes)
    docs = _check_schema(path, members, hashes)
    signer = None
    signed = SIGNATURE in members
    if signed:
        try:
            parse_signature(members[SIGNATURE])
        except ValueError as exc:
            raise _fail(path, str(exc), SIGNATURE) from None
    if public_key is not None:
        if not signed:
            raise _fail(path, "is not signed, but a public key was given to check it", SIGNATURE)
        try:
            signer = verify_manifest_signature(members[MANIFEST], members[SIGNATURE], public_key)
        except KeyFileError:
            raise
        except ValueError as exc:
            raise _fail(path, str(exc), SIGNATURE) from None
    file_hash = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            file_hash.update(block)
    return VerifiedBundle(
        path=path,
        sha256=file_hash.hexdigest(),
        members=members,
        member_sha256=hashes,
        engine_size=engine_size,
        signer=signer,
        signed=signed,
        docs=docs,
    )
