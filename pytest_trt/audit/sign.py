"""Optional Ed25519 signatures over a bundle's ``MANIFEST.sha256``.

The manifest pins the hash of every other member, so signing it signs the
bundle.  Ed25519 signatures are deterministic, which keeps signed bundles
byte-identical across writes.  ``cryptography`` (extra ``sign``) is imported
only when a key is actually used.
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


def load_private_key(path: Path) -> Any:
    """An Ed25519 private key from a PEM (PKCS#8) or OpenSSH key file without a passphrase."""
    serialization, ed25519, _ = _crypto()
    data = _read(path, "signing key")
    try:
        if b"OPENSSH PRIVATE KEY" in data:
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a readable unencrypted private key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise KeyFileError(f"{path}: is a {type(key).__name__}, an Ed25519 private key is needed")
    return key


def load_public_key(path: Path) -> Any:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo) or an OpenSSH ``ssh-ed25519`` line."""
    serialization, ed25519, _ = _crypto()
    data = _read(path, "public key")
    try:
        if data.lstrip().startswith(b"ssh-"):
            key = serialization.load_ssh_public_key(data.strip())
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not a readable public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise KeyFileError(f"{path}: is a {type(key).__name__}, an Ed25519 public key is needed")
    return key


def public_key_fingerprint(public_key: Any) -> str:
    serialization, _, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def sign_manifest(manifest: bytes, key_path: Path) -> bytes:
    """The signature member's bytes: JSON with algorithm, key fingerprint and base64 signature."""
    key = load_private_key(key_path)
    doc = {
        "algorithm": ALGORITHM,
        "public_key_sha256": public_key_fingerprint(key.public_key()),
        "signature": base64.b64encode(key.sign(manifest)).decode("ascii"),
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
    if doc["algorithm"] != ALGORITHM:
        raise ValueError(f"unsupported signature algorithm {doc['algorithm']!r}")
    try:
        raw = base64.b64decode(doc["signature"], validate=True)
    except (ValueError, TypeError):
        raise ValueError("signature is not valid base64") from None
    if len(raw) != 64:
        raise ValueError(f"an Ed25519 signature has 64 bytes, this one {len(raw)}")
    canonical = (json.dumps(doc, sort_keys=True, indent=2) + "\n").encode("ascii")
    if canonical != data:
        raise ValueError("signature member is not in canonical form")
    return doc


def verify_manifest_signature(manifest: bytes, signature: bytes, public_key_path: Path) -> str:
    """Raise ``ValueError`` unless ``signature`` signs ``manifest`` with the key; return its fingerprint."""
    _, _, invalid = _crypto()
    doc = parse_signature(signature)
    key = load_public_key(public_key_path)
    fingerprint = public_key_fingerprint(key)
    if doc["public_key_sha256"] != fingerprint:
        raise ValueError(
            f"signed by key sha256:{doc['public_key_sha256'][:16]}..., not by {public_key_path} "
            f"(sha256:{fingerprint[:16]}...)"
        )
    try:
        key.verify(base64.b64decode(doc["signature"]), manifest)
    except invalid:
        raise ValueError("signature does not match the manifest (manifest or signature changed)") from None
    return fingerprint
