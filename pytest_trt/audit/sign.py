"""Optional signatures over a bundle's ``MANIFEST.sha256``: Ed25519, or ECDSA P-256 with SHA-256.

The manifest pins the hash of every other member, so signing it signs the
bundle.  Ed25519 signatures are deterministic, and ECDSA ones are made
deterministic (RFC 6979), which keeps signed bundles byte-identical across
writes.  ``cryptography`` (extra ``sign``) is imported only when a key is
actually used.  The same key signs the bundle's attestations as DSSE envelopes
(:func:`dsse_envelopes`, for :mod:`pytest_trt.audit.attest`), with the keyid securesystemslib computes.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_trt.errors import KeyFileError, SigningUnavailable

SIGNATURE = "MANIFEST.sha256.sig"
ALGORITHM = "ed25519"
ECDSA_P256 = "ecdsa-p256-sha256"
ALGORITHMS = (ALGORITHM, ECDSA_P256)
_KINDS = "an Ed25519 or ECDSA P-256"


def _crypto() -> tuple[ModuleType, ModuleType, Any]:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SigningUnavailable(
            "bundle signing needs the 'cryptography' package: pip install 'pytest-trt[sign]'"
        ) from None
    return serialization, ed25519, InvalidSignature


def _read(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None


def algorithm_of(key: Any) -> str | None:
    """``"ed25519"`` or ``"ecdsa-p256-sha256"`` for a private or public key of those kinds; None for any other."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        return ALGORITHM
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)) and key.curve.name == "secp256r1":
        return ECDSA_P256
    return None


def load_private_key(path: Path) -> Any:
    """An Ed25519 or ECDSA P-256 private key from a PEM (PKCS#8) or OpenSSH key file without a passphrase."""
    serialization, _, _ = _crypto()
    data = _read(path, "signing key")
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a readable unencrypted private key ({exc})") from None
    if algorithm_of(key) is None:
        raise KeyFileError(f"{path}: is a {_kind(key)}, {_KINDS} private key is needed")
    return key


def load_public_key(path: Path) -> Any:
    """An Ed25519 or ECDSA P-256 public key from PEM (SubjectPublicKeyInfo) or an OpenSSH public key line."""
    serialization, _, _ = _crypto()
    data = _read(path, "public key")
    try:
        if data.lstrip().startswith((b"ssh-", b"ecdsa-")):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a readable public key ({exc})") from None
    if algorithm_of(key) is None:
        raise KeyFileError(f"{path}: is a {_kind(key)}, {_KINDS} public key is needed")
    return key


def _kind(key: Any) -> str:
    curve = getattr(key, "curve", None)
    return f"{type(key).__name__} ({curve.name})" if curve is not None else type(key).__name__


def public_key_fingerprint(public_key: Any) -> str:
    """sha256 of the raw public key: Ed25519's 32 bytes, or P-256's uncompressed point (X9.62)."""
    serialization, _, _ = _crypto()
    if algorithm_of(public_key) == ECDSA_P256:
        raw = public_key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    else:
        raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def sign_bytes(key: Any, data: bytes) -> bytes:
    """The signature of ``data``: Ed25519, or DER ECDSA P-256 over SHA-256 with RFC 6979 (deterministic) nonces."""
    if algorithm_of(key) == ECDSA_P256:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        signature: bytes = key.sign(data, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
        return signature
    signature = key.sign(data)
    return signature


def verify_bytes(public_key: Any, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` signs ``data`` with ``public_key`` (either kind)."""
    _, _, invalid = _crypto()
    try:
        if algorithm_of(public_key) == ECDSA_P256:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import ec

            public_key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
        else:
            public_key.verify(signature, data)
    except invalid:
        return False
    return True


def sign_manifest(manifest: bytes, key_path: Path) -> bytes:
    """The signature member's bytes: JSON with algorithm, key fingerprint and base64 signature."""
    key = load_private_key(key_path)
    doc = {
        "algorithm": algorithm_of(key),
        "public_key_sha256": public_key_fingerprint(key.public_key()),
        "signature": base64.b64encode(sign_bytes(key, manifest)).decode("ascii"),
    }
    return (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("ascii")


def parse_signature(data: bytes) -> dict[str, str]:
    """Check the signature member's form; raise ``ValueError`` saying what is wrong."""
    try:
        doc = json.loads(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ValueError("signature member is not ASCII JSON") from None
    if not isinstance(doc, dict) or set(doc) != {"algorithm", "public_key_sha256", "signature"}:
        raise ValueError("signature member must hold exactly algorithm, public_key_sha256, signature")
    if doc["algorithm"] not in ALGORITHMS:
        raise ValueError(f"unsupported signature algorithm {doc['algorithm']!r}")
    try:
        raw = base64.b64decode(doc["signature"], validate=True)
    except (ValueError, TypeError):
        raise ValueError("signature is not valid base64") from None
    if doc["algorithm"] == ALGORITHM and len(raw) != 64:
        raise ValueError(f"an Ed25519 signature has 64 bytes, this one {len(raw)}")
    if doc["algorithm"] == ECDSA_P256 and not 8 <= len(raw) <= 72:
        raise ValueError(f"a DER ECDSA P-256 signature has 8 to 72 bytes, this one {len(raw)}")
    canonical = (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("ascii")
    if canonical != data:
        raise ValueError("signature member is not in canonical form")
    return doc


def verify_manifest_signature(manifest: bytes, signature: bytes, public_key_path: Path) -> str:
    """Raise ``ValueError`` unless ``signature`` signs ``manifest`` with the key; return its fingerprint."""
    doc = parse_signature(signature)
    key = load_public_key(public_key_path)
    fingerprint = public_key_fingerprint(key)
    if doc["public_key_sha256"] != fingerprint:
        raise ValueError(
            f"signed by key sha256:{doc['public_key_sha256'][:16]}..., not by {public_key_path} "
            f"(sha256:{fingerprint[:16]}...)"
        )
    if doc["algorithm"] != algorithm_of(key):
        raise ValueError(f"signed with {doc['algorithm']}, but {public_key_path} is an {algorithm_of(key)} key")
    if not verify_bytes(key, base64.b64decode(doc["signature"]), manifest):
        raise ValueError("signature does not match the manifest (manifest or signature changed)")
    return fingerprint


# -- DSSE envelopes (the attestations beside a bundle) --------------------------------------------------


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: what an envelope's signature signs."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def _olpc(value: Any) -> str:
    """OLPC canonical JSON of a dict of strings (the spelling keyids are hashed from: only ``\\`` and ``"`` escaped)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_olpc(k)}:{_olpc(value[k])}" for k in sorted(value)) + "}"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def key_metadata(public_key: Any) -> dict[str, Any]:
    """The key as DSSE verifiers describe it: ``{"keytype", "scheme", "keyval": {"public"}}``."""
    from cryptography.hazmat.primitives import serialization

    if algorithm_of(public_key) == ECDSA_P256:
        pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return {"keytype": "ecdsa", "scheme": "ecdsa-sha2-nistp256", "keyval": {"public": pem.decode("ascii")}}
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": raw.hex()}}


def keyid(public_key: Any) -> str:
    """sha256 of the key's metadata in OLPC canonical JSON: the keyid securesystemslib computes for it."""
    return hashlib.sha256(_olpc(key_metadata(public_key)).encode("utf-8")).hexdigest()


def dsse_envelopes(payload_type: str, payloads: list[bytes], key_path: Path | None
                   ) -> tuple[list[dict[str, Any]], str | None, str | None]:
    """DSSE envelopes of ``payloads``, signed with the private key at ``key_path`` (unsigned: no signatures);
    with the key's algorithm and keyid (None, None unsigned)."""
    key = load_private_key(key_path) if key_path is not None else None
    key_id = keyid(key.public_key()) if key is not None else None
    envelopes = []
    for payload in payloads:
        signatures = []
        if key is not None:
            sig = sign_bytes(key, pae(payload_type, payload))
            signatures.append({"keyid": key_id, "sig": base64.b64encode(sig).decode("ascii")})
        envelopes.append({"payload": base64.b64encode(payload).decode("ascii"), "payloadType": payload_type,
                          "signatures": signatures})
    return envelopes, algorithm_of(key) if key is not None else None, key_id
