"""Hostile and hand-edited bundles: a clear BundleIntegrityError (exit 1 in the CLI), bounded memory, no traceback."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt.audit.verify import verify_bundle
from pytest_trt.errors import BundleIntegrityError
from tests.audit.hostile import recrafted, tar_bomb, unsigned_copy
from tests.conftest import RTX_MM, needs_rtx

ROOT = Path(__file__).resolve().parents[2]


def _set(path: str, value: object):
    """An edit setting the dotted ``path`` of a JSON document to ``value``."""
    *parents, last = path.split(".")

    def edit(doc):
        for key in parents:
            doc = doc[key]
        doc[last] = value
    return edit


def _drop(path: str):
    *parents, last = path.split(".")

    def edit(doc):
        for key in parents:
            doc = doc[key]
        del doc[last]
    return edit


# (member, edit, what the user is told): the probe's crash classes and their siblings
WRONG_TYPES = [
    ("build.json", _set("build", [1]), "build.json:build: expected an object, found an array"),
    ("build.json", _set("record", [1]), "build.json:record: expected an object or null, found an array"),
    ("build.json", _set("record.memory", []), "build.json:record.memory: expected an object, found an array"),
    ("build.json", _set("record.fusion_events", [1]), "build.json:record.fusion_events.0: expected an object"),
    ("build.json", _set("record.layers", [{"name": 1, "type": "Conv"}]),
     "build.json:record.layers.0.name: expected a string, found an integer"),
    ("build.json", _set("record.layer_counts", [["Original"]]), "build.json:record.layer_counts.0: expected 2 items"),
    ("build.json", _set("record.timings", {"build_s": "slow"}), "build.json:record.timings.build_s: expected"),
    ("build.json", _drop("record.source"), "build.json:record.source: required key is missing"),
    ("build.json", _set("bundle_schema", "1"), "build.json:bundle_schema: expected an integer, found a string"),
    ("build.json", _set("build.engine_sha256", 5), "build.json:build.engine_sha256: expected a string"),
    ("build.json", _set("build.durations", {"build": [1]}), "build.json:build.durations.build: expected"),
    ("build.json", _set("build.versions", "1.7"), "build.json:build.versions: expected an object or null"),
    ("build.json", _drop("build.config_hash"), "build.json:build.config_hash: required key is missing"),
    ("config.json", _set("pinned", None), "config.json:pinned: expected an object, found null"),
    ("config.json", _set("config_hash", 1), "config.json:config_hash: expected a string"),
    ("environment.json", _set("gpus", ["H200"]), "environment.json:gpus.0: expected an object, found a string"),
    ("environment.json", _set("python", "3.10"), "environment.json:python: expected an object or null"),
    ("environment.json", _set("pip_freeze", [1]), "environment.json:pip_freeze.0: expected a string"),
    ("golden.json", _set("checks", [1]), "golden.json:checks: expected an object, found an array"),
    ("golden.json", _set("checks", {"t": "pass"}), "golden.json:checks.t: expected an object, found a string"),
]


@pytest.mark.parametrize(("member", "edit", "message"), WRONG_TYPES, ids=[m for *_, m in WRONG_TYPES])
def test_self_consistent_bundle_with_wrong_typed_json_is_refused_by_name(small_signed_bundle, tmp_path, member,
                                                                         edit, message):
    path = recrafted(small_signed_bundle, tmp_path / "crafted.tar.gz", {member: edit})
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(path)
    assert info.value.context["member"] == member
    assert info.value.message.startswith(f"{path}: member {member}: wrong schema: ")
    assert message in info.value.message


def test_edited_signed_bundle_fails_the_signature_before_any_json_is_read(small_signed_bundle, keypair, tmp_path):
    """A hand-edited signed bundle is 'signature does not match', even when its JSON would crash a reader."""
    path = recrafted(small_signed_bundle, tmp_path / "edited.tar.gz", {"build.json": _set("record", [1])})
    with pytest.raises(BundleIntegrityError) as info:
        verify_bundle(path, public_key=keypair[1])
    assert info.value.context["member"] == "MANIFEST.sha256.sig"
    assert "signature does not match the manifest" in info.value.message


def test_unsigned_copy_still_verifies(small_signed_bundle, tmp_path):
    """Positive control of the helpers: re-crafting without an edit keeps a valid bundle."""
    verify_bundle(recrafted(small_signed_bundle, tmp_path / "same.tar.gz", {}))
    verify_bundle(unsigned_copy(small_signed_bundle, tmp_path / "unsigned.tar.gz"))


_RSS_CHILD = textwrap.dedent("""
    import resource, sys, json
    from pathlib import Path
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.errors import BundleIntegrityError
    try:
        verify_bundle(Path(sys.argv[1]))
        outcome = "verified"
    except BundleIntegrityError as exc:
        outcome = exc.message
    # Linux keeps ru_maxrss across fork and exec (the child would report pytest's own peak), so the
    # peak of this process's memory map, VmHWM, is the bound checked; ru_maxrss is reported alongside
    hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")]
    print(json.dumps({"outcome": outcome, "peak_rss_kib": hwm[0] if hwm else None,
                      "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
""")


def _verify_in_child(path: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(path)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


#: python, pytest-trt's audit modules and the verifier's buffers; the probe measured 4.2 GB before the fix
RSS_BOUND_MIB = 100


@pytest.mark.parametrize(("member", "message"), [
    ("build.json", "member build.json declares 2,147,483,648 bytes, more than the 67,108,864 accepted"),
    ("engine.plan", "differs from the writer's archive of its members from byte"),
])
def test_two_gib_bomb_is_refused_with_bounded_memory(tmp_path, member, message):
    bomb = tar_bomb(tmp_path / "bomb.tar.gz", member=member, declared=2 << 30, zeros_mib=2048)
    assert bomb.stat().st_size < 4 << 20  # 2 GiB of zeros, a few MB on disk
    with gzip.open(bomb) as fh:  # it is what it claims: a header declaring 2 GiB, then zeros
        assert fh.read(512)[124:136] == b"%011o\0" % (2 << 30) and fh.read(32 << 20) == bytes(32 << 20)
    got = _verify_in_child(bomb)
    assert message in str(got["outcome"])
    if got["peak_rss_kib"] is None:
        pytest.skip("no /proc/self/status VmHWM on this platform: the memory bound is checked on Linux")
    assert int(str(got["peak_rss_kib"])) < RSS_BOUND_MIB * 1024, got


def test_a_log_member_that_inflates_past_the_limit_is_refused(small_signed_bundle, tmp_path, monkeypatch):
    from pytest_trt.audit import verify as verify_mod
    from pytest_trt.audit.manifest import MANIFEST, render_manifest, sha256_hex
    from tests.audit.conftest import read_members, rebuild

    members = read_members(small_signed_bundle)
    members.pop("MANIFEST.sha256.sig")
    members["build.log.gz"] = gzip.compress(bytes(8 << 20), compresslevel=1, mtime=0)
    members[MANIFEST] = render_manifest({n: sha256_hex(d) for n, d in members.items() if n != MANIFEST})
    path = tmp_path / "logbomb.tar.gz"
    path.write_bytes(rebuild(members))
    monkeypatch.setattr(verify_mod, "MAX_LOG_BYTES", 1 << 20)
    with pytest.raises(BundleIntegrityError, match=r"build.log.gz: does not decompress to UTF-8 text "
                                                   r"\(decompresses to more than 1,048,576 bytes, "):
        verify_bundle(path)


@needs_rtx
@pytest.mark.parametrize("kind", ["bomb", "wrong-typed"])
def test_a_bad_file_at_the_bundle_path_is_set_aside_and_reported(pytester, models, small_signed_bundle, kind):
    """The recorder verifies what sits at a bundle's path before merging: never an INTERNALERROR, never lost."""
    from tests.audit.test_pytest_hooks import HOOKS, SUITE

    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    path = pytester.path / "trt-bundles" / f"cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz"
    path.parent.mkdir()
    if kind == "bomb":
        tar_bomb(path, member="build.json", declared=2 << 30, zeros_mib=256)
        why = "member build.json declares 2,147,483,648 bytes"
    else:
        recrafted(small_signed_bundle, path, {"build.json": _set("record", [1])})
        why = "wrong schema: build.json:record: expected an object or null, found an array"
    bad = path.read_bytes()
    result = pytester.runpytest_subprocess(*HOOKS, "-k", "plain")
    result.assert_outcomes(passed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines([f"WARNING {path}: the file already there failed verification and was moved to "
                                 f"{path.name}.invalid; this build's bundle replaces it (*{why}*"])
    assert path.with_name(path.name + ".invalid").read_bytes() == bad  # kept for inspection, not lost
    verify_bundle(path)


def test_deeply_nested_json_is_refused_before_readers_recurse(small_signed_bundle, tmp_path):
    nested: list = []
    for _ in range(200):
        nested = [nested]
    path = recrafted(small_signed_bundle, tmp_path / "deep.tar.gz", {"environment.json": _set("cpu", {"x": nested})})
    with pytest.raises(BundleIntegrityError, match="member environment.json: nests deeper than 64 levels"):
        verify_bundle(path)


def test_build_json_naming_another_engine_is_refused(small_signed_bundle, tmp_path):
    other = "0123456789abcdef" * 4
    path = recrafted(small_signed_bundle, tmp_path / "other-engine.tar.gz", {"build.json": _set("build.engine_sha256",
                                                                                               other)})
    with pytest.raises(BundleIntegrityError, match=f"member build.json: engine sha256 {other} does not match the "
                                                   r"engine \([0-9a-f]{64}\)"):
        verify_bundle(path)


def test_a_member_added_to_a_signed_bundle_outside_the_manifest_is_refused(small_build, record_of, keypair,
                                                                            tmp_path):
    """Forged golden verdicts slipped next to a signed manifest: the signature still matches, the listing does not."""
    from pytest_trt.audit.bundle import canonical_json, write_bundle
    from tests.audit.conftest import read_members, rebuild

    info = write_bundle(small_build, tmp_path, record=None, environment={"schema": 1}, include_engine=False,
                        sign_key=keypair[0])
    members = read_members(info.path)
    assert "golden.json" not in members
    members["golden.json"] = canonical_json({"schema": 1, "checks": {"tests/t.py::t": {"verdict": "pass"}}})
    path = tmp_path / "smuggled.tar.gz"
    path.write_bytes(rebuild(members))
    with pytest.raises(BundleIntegrityError, match="member golden.json: present in the archive but not listed in "
                                                   "MANIFEST.sha256"):
        verify_bundle(path, public_key=keypair[1])
