"""100 % tamper detection: every single-byte change of a signed bundle fails verification.

The verifier rebuilds the writer's deterministic archive from the members it
verified and compares it with the file, so changes that decompress to the
same members (gzip header fields, deflate bits) are caught too.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.conftest import read_members, rebuild

ROOT = Path(__file__).resolve().parents[2]


def test_every_single_byte_flip_of_a_signed_bundle_is_detected(small_signed_bundle, keypair, tmp_path):
    raw = small_signed_bundle.read_bytes()
    assert 4000 < len(raw) < 12000, len(raw)  # small on purpose: every position is tried
    verify_bundle(small_signed_bundle, public_key=keypair[1])  # positive control
    path = tmp_path / "flipped.tar.gz"
    path.write_bytes(raw)
    missed = []
    fd = os.open(path, os.O_WRONLY)  # flip and restore one byte in place: truncating rewrites cost 3 ms each
    try:
        for pos in range(len(raw)):
            os.pwrite(fd, bytes([raw[pos] ^ 0x01]), pos)
            try:
                verify_bundle(path, public_key=keypair[1])
            except BundleIntegrityError:
                continue
            finally:
                os.pwrite(fd, raw[pos:pos + 1], pos)
            missed.append(pos)
    finally:
        os.close(fd)
    assert path.read_bytes() == raw
    assert missed == [], f"{len(missed)} of {len(raw)} flips passed verification, first at {missed[:10]}"


@pytest.mark.parametrize(("where", "change"), [
    ("gzip mtime", lambda raw: raw[:4] + b"\x01\x00\x00\x00" + raw[8:]),
    ("gzip OS byte", lambda raw: raw[:9] + b"\x03" + raw[10:]),
    ("recompressed at level 9", lambda raw: gzip.compress(gzip.decompress(raw), compresslevel=9, mtime=0)),
])
def test_changes_that_decompress_to_the_same_members_are_detected(small_signed_bundle, keypair, tmp_path, where,
                                                                  change):
    raw = small_signed_bundle.read_bytes()
    changed = change(raw)
    assert changed != raw and gzip.decompress(changed) == gzip.decompress(raw), where  # same tar bytes
    path = tmp_path / "same-members.tar.gz"
    path.write_bytes(changed)
    with pytest.raises(BundleIntegrityError, match="differs from byte .* deterministic archive of its own"):
        verify_bundle(path, public_key=keypair[1])


def test_a_replaced_well_formed_log_is_refused_by_its_hash(small_signed_bundle, tmp_path):
    """Kills the mutant 'verify skips the sha256 of build.log.gz': the manifest still lists the old log."""
    members = read_members(small_signed_bundle)
    old_log = gzip.decompress(members["build.log.gz"])
    forged = old_log.replace(b"WARNING", b"INFO") + b"[I] [TRT] engine approved by QA\n"
    members["build.log.gz"] = gzip.compress(forged, mtime=0)
    path = tmp_path / "forged-log.tar.gz"
    path.write_bytes(rebuild(members))  # canonical framing: only the member hash can catch it
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(path)
    assert info.value.context["member"] == "build.log.gz"
    expected = hashlib.sha256(members["build.log.gz"]).hexdigest()
    assert "sha256 mismatch: manifest " in info.value.message and f"actual {expected}" in info.value.message


_DIE_MID_WRITE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import pytest_trt.audit.gathered as gathered_mod
    import pytest_trt.audit.bundle as bundle_mod
    from tests.audit.rtx_build import build_small

    def dying_writer(fd, chunks, **options):
        os.write(fd, bytes(chunks[0])[:100])  # the archive's first bytes reach the file, then
        os._exit(17)  # the writer process dies: no cleanup, no exception handler runs

    result = build_small()
    gathered_mod.write_buffers = dying_writer  # the bundle writer calls it through its module when it writes
    bundle_mod.write_bundle(result, Path(sys.argv[1]), record=None, environment={"schema": 1},
                            include_engine=False, name=sys.argv[2])
""")


def test_a_writer_dying_mid_write_leaves_the_previous_bundle_intact(small_build, tmp_path):
    """Kills the mutant 'bundles written in place': the old file must survive a writer killed half-way."""
    from pytest_trt.audit.bundle import write_bundle

    info = write_bundle(small_build, tmp_path, record=None, environment={"schema": 1}, include_engine=False)
    before = info.path.read_bytes()
    proc = subprocess.run([sys.executable, "-c", _DIE_MID_WRITE, str(tmp_path), info.path.name], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 17, proc.stderr
    assert info.path.read_bytes() == before
    assert verify_bundle(info.path).sha256 == hashlib.sha256(before).hexdigest()


#: bytes appended after a bundle's end, as a tamperer or a broken copy leaves them
APPENDED = {
    "one zero byte": b"\0",
    "zeros": bytes(100),
    "a full tar record of zeros": bytes(10240),
    "text": b"TAMPER",
    "an empty gzip member": gzip.compress(b"", mtime=0),
    "a gzip member of zeros": gzip.compress(bytes(1000), mtime=0),
}


@pytest.mark.parametrize("tail", list(APPENDED.values()), ids=list(APPENDED))
def test_bytes_appended_after_the_end_of_a_bundle_fail_verification(small_signed_bundle, keypair, tmp_path, tail):
    raw = small_signed_bundle.read_bytes()
    assert verify_bundle(small_signed_bundle).sha256 == hashlib.sha256(raw).hexdigest()
    path = tmp_path / small_signed_bundle.name
    path.write_bytes(raw + tail)
    assert hashlib.sha256(path.read_bytes()).hexdigest() != hashlib.sha256(raw).hexdigest()
    for key in (None, keypair[1]):  # the members and their signature are intact: only the file's bytes tell
        with pytest.raises(BundleIntegrityError):
            verify_bundle(path, public_key=key)
    run = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "bundle", "verify", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and run.stdout.startswith(f"FAILED  {path}: ") and "Traceback" not in run.stderr


def test_a_whole_second_bundle_appended_fails_verification(small_signed_bundle, tmp_path):
    raw = small_signed_bundle.read_bytes()
    path = tmp_path / "twice.tar.gz"
    path.write_bytes(raw + raw)
    with gzip.open(path) as fh:  # gzip readers see both archives' bytes: it is a valid multi-member gzip file
        assert len(fh.read()) == 2 * len(gzip.decompress(raw))
    with pytest.raises(BundleIntegrityError):
        verify_bundle(path)
