"""Signing keys: formats, wrong key types, and a clear error without cryptography."""

from __future__ import annotations

import base64
import json
import sys

import pytest

from pytest_trt.audit import sign


def test_openssh_keys_work(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private, public = tmp_path / "id_ed25519", tmp_path / "id_ed25519.pub"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    signature = sign.sign_manifest(b"manifest\n", private)
    assert sign.verify_manifest_signature(b"manifest\n", signature, public) == sign.public_key_fingerprint(key.public_key())
    with pytest.raises(ValueError, match="does not match the manifest"):
        sign.verify_manifest_signature(b"manifest!\n", signature, public)


def test_keys_other_than_ed25519_and_p256_are_refused(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = tmp_path / "ec384.pem"
    path.write_bytes(ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with pytest.raises(sign.KeyFileError, match="an Ed25519 or ECDSA P-256 private key is needed"):
        sign.load_private_key(path)
    with pytest.raises(sign.KeyFileError, match="cannot read signing key"):
        sign.load_private_key(tmp_path / "missing.pem")


def test_ecdsa_manifest_signature_is_deterministic(tmp_path):
    """P-256 signs with RFC 6979 nonces: the same manifest gives the same bytes, which cryptography verifies."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private, public = tmp_path / "p256.pem", tmp_path / "p256.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    first, second = sign.sign_manifest(b"manifest\n", private), sign.sign_manifest(b"manifest\n", private)
    assert first == second
    doc = json.loads(first)
    assert doc["algorithm"] == "ecdsa-p256-sha256"
    key.public_key().verify(base64.b64decode(doc["signature"]), b"manifest\n", ec.ECDSA(hashes.SHA256()))
    assert sign.verify_manifest_signature(b"manifest\n", first, public) == doc["public_key_sha256"]
    with pytest.raises(ValueError, match="does not match the manifest"):
        sign.verify_manifest_signature(b"manifest!\n", first, public)


def test_missing_cryptography_is_a_clear_error(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "cryptography" or m.startswith("cryptography.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "cryptography", None)  # import now fails as if not installed
    with pytest.raises(sign.SigningUnavailable, match=r"pip install 'pytest-trt\[sign\]'"):
        sign.sign_manifest(b"m\n", tmp_path / "key.pem")
