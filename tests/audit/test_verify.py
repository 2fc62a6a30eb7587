"""The verifier: manifest hashes, schema, tamper detection, unsafe tar members, signatures."""

from __future__ import annotations

import tarfile

import pytest

from pytest_trt.audit.manifest import MANIFEST
from pytest_trt.audit.sign import SIGNATURE
from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.conftest import raw_tar, read_members, rebuild


def _flip(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x01]) + data[pos + 1:]


def test_a_good_bundle_verifies_with_its_public_key(signed_bundle, keypair):
    vb = verify_bundle(signed_bundle, public_key=keypair[1])
    assert vb.signed and vb.signer is not None and len(vb.signer) == 64
    assert vb.golden == {"tests/test_m.py::test_a": {"verdict": "pass", "config_hash": vb.config["config_hash"]}}
    assert vb.engine_size is not None and vb.engine_size > 0


def test_every_single_byte_change_of_every_member_is_detected(tmp_path, signed_bundle, keypair):
    members = read_members(signed_bundle)
    checked = 0
    for name, data in members.items():
        for pos in sorted({0, len(data) // 2, len(data) - 1}):
            tampered = tmp_path / f"{name}-{pos}.tar.gz"
            tampered.write_bytes(rebuild({**members, name: _flip(data, pos)}))
            with pytest.raises(BundleIntegrityError) as info:
                verify_bundle(tampered, public_key=keypair[1])
            blamed = info.value.context["member"]
            if name == MANIFEST:
                # a changed manifest is bad in form, or names a member whose hash no longer matches
                assert blamed in set(members), info.value.message
            else:
                assert blamed == name, info.value.message
            assert str(tampered) in info.value.message
            checked += 1
    assert checked >= 3 * len(members) - 2


def test_byte_changes_of_the_compressed_file_are_detected(tmp_path, signed_bundle):
    raw = signed_bundle.read_bytes()
    for pos in (0, 10, len(raw) // 2, len(raw) - 5, len(raw) - 1):
        tampered = tmp_path / f"raw-{pos}.tar.gz"
        tampered.write_bytes(_flip(raw, pos))
        with pytest.raises(BundleIntegrityError):
            verify_bundle(tampered)


def test_without_public_key_a_signed_bundle_is_still_hash_checked(tmp_path, signed_bundle):
    members = read_members(signed_bundle)
    vb = verify_bundle(signed_bundle)
    assert vb.signed and vb.signer is None
    tampered = tmp_path / "t.tar.gz"
    tampered.write_bytes(rebuild({**members, "build.json": members["build.json"].replace(b'"engine_included":true', b'"engine_included":false')}))
    with pytest.raises(BundleIntegrityError, match="build.json: sha256 mismatch"):
        verify_bundle(tampered)


def test_consistent_forgery_fails_the_signature(tmp_path, signed_bundle, keypair):
    """Changing a member *and* its manifest line keeps the hashes right; only the signature catches it."""
    import gzip

    from pytest_trt.audit.archive import gzip_bytes
    from pytest_trt.audit.manifest import render_manifest, sha256_hex

    members = read_members(signed_bundle)
    members["build.log.gz"] = gzip_bytes(gzip.decompress(members["build.log.gz"]) + b"[INFO] forged\n")
    hashes = {n: sha256_hex(d) for n, d in members.items() if n not in (MANIFEST, SIGNATURE)}
    members[MANIFEST] = render_manifest(hashes)
    forged = tmp_path / "forged.tar.gz"
    forged.write_bytes(rebuild(members))
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(forged, public_key=keypair[1])
    assert info.value.context["member"] == SIGNATURE
    assert "signature does not match the manifest" in info.value.message


def test_unsigned_bundle_fails_when_a_public_key_is_required(tmp_path, signed_bundle, keypair):
    members = read_members(signed_bundle)
    del members[SIGNATURE]
    path = tmp_path / "unsigned.tar.gz"
    path.write_bytes(rebuild(members))
    verify_bundle(path)
    with pytest.raises(BundleIntegrityError, match="is not signed"):
        verify_bundle(path, public_key=keypair[1])


def test_wrong_public_key_is_named(tmp_path, signed_bundle):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    other = tmp_path / "other.pub"
    other.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH))
    with pytest.raises(BundleIntegrityError, match="signed by key sha256:.*not by .*other.pub"):
        verify_bundle(signed_bundle, public_key=other)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m: m.pop("config.json"), "MANIFEST.sha256: lists 'config.json', which is missing from the archive"),
    (lambda m: m.update({"extra.txt": b"x"}), r"extra.txt: unsafe tar member refused \(unknown member name"),
    (lambda m: m.pop(MANIFEST), "has no MANIFEST.sha256"),
])
def test_missing_and_extra_members(tmp_path, signed_bundle, change, message):
    members = read_members(signed_bundle)
    change(members)
    path = tmp_path / "b.tar.gz"
    path.write_bytes(rebuild(members))
    with pytest.raises(BundleIntegrityError, match=message):
        verify_bundle(path)


def _info(name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


@pytest.mark.parametrize(("entries", "member", "why"), [
    ([(_info("/etc/evil", size=1), b"x")], "/etc/evil", "absolute path"),
    ([(_info("../evil", size=1), b"x")], "../evil", "'..'"),
    ([(_info("a/../../evil", size=1), b"x")], "a/../../evil", "'..'"),
    ([(_info("sub/file", size=1), b"x")], "sub/file", "nested path"),
    ([(_info("link", tarfile.SYMTYPE, link="/etc/passwd"), None)], "link", "link to '/etc/passwd'"),
    ([(_info("hard", tarfile.LNKTYPE, link="build.json"), None)], "hard", "link to 'build.json'"),
    ([(_info("dev", tarfile.CHRTYPE), None)], "dev", "device file"),
    ([(_info("blk", tarfile.BLKTYPE), None)], "blk", "device file"),
    ([(_info("fifo", tarfile.FIFOTYPE), None)], "fifo", "FIFO"),
    ([(_info("dir", tarfile.DIRTYPE), None)], "dir", "directory"),
    ([(_info("build.json", size=1), b"a"), (_info("build.json", size=1), b"b")], "build.json", "duplicate member"),
])
def test_unsafe_members_are_refused_without_extracting(tmp_path, entries, member, why):
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / "evil.tar.gz"
    path.write_bytes(raw_tar(entries))
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(path)
    assert info.value.context["member"] == member
    assert why in info.value.message and "unsafe tar member refused" in info.value.message
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["evil.tar.gz", "in"], "something was extracted"


def test_not_a_bundle(tmp_path):
    path = tmp_path / "x.tar.gz"
    path.write_bytes(b"hello")
    with pytest.raises(BundleIntegrityError, match="not a readable tar.gz"):
        verify_bundle(path)
    with pytest.raises(FileNotFoundError):
        verify_bundle(tmp_path / "missing.tar.gz")


def test_trailing_data_after_the_archive_is_refused(tmp_path, signed_bundle):
    import gzip

    raw = gzip.decompress(signed_bundle.read_bytes()) + b"appended"
    path = tmp_path / "t.tar.gz"
    path.write_bytes(gzip.compress(raw))
    with pytest.raises(BundleIntegrityError, match="non-zero data after the last member"):
        verify_bundle(path)


def test_manifest_must_be_canonical():
    from pytest_trt.audit.manifest import parse_manifest

    good = b"%s  a.json\n%s  b.json\n" % (b"a" * 64, b"1" * 64)
    assert parse_manifest(good) == {"a.json": "a" * 64, "b.json": "1" * 64}
    for bad in (good.upper(), good[:-1], good.replace(b"  ", b" "), b"%s  b.json\n%s  a.json\n" % (b"1" * 64, b"a" * 64)):
        with pytest.raises(ValueError):
            parse_manifest(bad)


def test_a_gzip_member_appended_after_the_bundle_is_refused(tmp_path, signed_bundle):
    """A second gzip stream after the writer's: a gzip reader reads on into it; the file is not the writer's."""
    import gzip

    path = tmp_path / "appended.tar.gz"
    path.write_bytes(signed_bundle.read_bytes() + gzip.compress(bytes(1024)))  # zeros: read as tar padding
    with pytest.raises(BundleIntegrityError, match="the file differs from byte"):
        verify_bundle(path)
    path.write_bytes(signed_bundle.read_bytes() + b"\0" * 16)  # zero padding after the last gzip member
    with pytest.raises(BundleIntegrityError, match="not a readable tar.gz archive"):
        verify_bundle(path)


@pytest.mark.parametrize("cut", [1, 4, 8, 9])
def test_a_bundle_cut_inside_its_last_gzip_trailer_is_truncated(tmp_path, signed_bundle, cut):
    """The last 8 bytes are the CRC-32 and length of the last gzip member: a file ending before them is refused as
    truncated, before any member is trusted."""
    path = tmp_path / "cut.tar.gz"
    path.write_bytes(signed_bundle.read_bytes()[:-cut])
    with pytest.raises(BundleIntegrityError, match=r"the file ends inside a gzip member \(truncated file\)"):
        verify_bundle(path)


def test_a_bundle_with_a_wrong_crc_in_a_gzip_trailer_is_refused(tmp_path, signed_bundle):
    raw = bytearray(signed_bundle.read_bytes())
    raw[-8] ^= 0x01  # CRC-32 of the last gzip member
    path = tmp_path / "crc.tar.gz"
    path.write_bytes(bytes(raw))
    with pytest.raises(BundleIntegrityError, match="not a readable tar.gz archive"):
        verify_bundle(path)


@pytest.mark.parametrize("depth", [1, 2, 3, 63, 64, 65, 130])
def test_json_depth_is_counted_on_the_bytes_exactly(depth):
    """Nesting built to a known depth, with brackets and escaped quotes inside strings that must not count."""
    import json

    from pytest_trt.audit.verify import MAX_JSON_DEPTH, _depth

    doc: object = {"a": "[{\\\"[", "b": 1}
    for i in range(depth - 1):
        doc = [doc, "]}\""] if i % 2 == 0 else {"k[": doc, "s": "{"}
    assert _reference_depth(doc) == depth  # the construction, counted independently
    found = _depth(json.dumps(doc, separators=(",", ":")).encode(), MAX_JSON_DEPTH)
    assert found == depth if depth <= MAX_JSON_DEPTH else found > MAX_JSON_DEPTH


def _reference_depth(value: object) -> int:
    """Containers' nesting depth, recursively."""
    if isinstance(value, dict):
        return 1 + max((_reference_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_reference_depth(v) for v in value), default=0)
    return 0
