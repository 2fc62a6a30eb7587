"""The bundle writer: name, members, determinism, atomic write."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import pytest

from pytest_trt.audit import bundle as b
from pytest_trt.audit.bundle import bundle_name, device_slug, write_bundle
from pytest_trt.audit.verify import verify_bundle
from tests.audit.conftest import read_members
from tests.conftest import RTX_MM, RTX_VERSION


def test_name_follows_the_pattern(mnv2):
    assert bundle_name(mnv2) == f"mobilenet_v2-v1.2.3-rtx{RTX_MM}-cpu-aot.tar.gz"


@pytest.mark.parametrize(("device", "slug"), [
    ({"kind": "gpu", "name": "NVIDIA H200", "compute_capability": "9.0"}, "h200"),
    ({"kind": "gpu", "name": "NVIDIA A100-SXM4-80GB"}, "a100-sxm4-80gb"),
    ({"kind": "gpu", "name": "NVIDIA GeForce RTX 4090"}, "rtx4090"),
    ({"kind": "cpu-aot", "targets": ["SM89", "SM120"]}, "cpu-aot-sm89-sm120"),
    ({"kind": "cpu-aot", "targets": ["default"]}, "cpu-aot"),
    ({"kind": "cpu"}, "cpu"),
    ({}, "cpu"),
])
def test_device_slug(device, slug):
    assert device_slug(device) == slug


def test_two_writes_give_identical_bytes(tmp_path, mnv2, record_of, environment):
    kwargs = dict(record=record_of(mnv2), environment=environment, golden_results={"t::x": {"verdict": "pass"}})
    one = write_bundle(mnv2, tmp_path / "one", **kwargs)
    two = write_bundle(mnv2, tmp_path / "two", **kwargs)
    assert one.path.read_bytes() == two.path.read_bytes()
    assert one.sha256 == two.sha256 and one.size == one.path.stat().st_size


def test_signed_bundles_are_deterministic_too(tmp_path, mnv2, record_of, environment, keypair):
    paths = [write_bundle(mnv2, tmp_path / d, record=record_of(mnv2), environment=environment,
                          sign_key=keypair[0]).path for d in ("a", "b")]
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_archive_headers_are_fixed(tmp_path, mnv2, record_of, environment):
    path = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment).path
    raw = path.read_bytes()
    assert raw[:3] == b"\x1f\x8b\x08" and raw[3] == 0, "gzip header must carry no file name or flags"
    assert raw[4:8] == b"\0\0\0\0", "gzip mtime must be zero"
    with tarfile.open(path, "r:gz") as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == sorted(m.name for m in members)
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode, m.isreg()) == (0, 0, 0, "", "", 0o644, True)
    assert not list(tmp_path.rglob(".*.tmp")), "the temporary file was left behind"


def test_a_bundle_write_never_lists_the_bundle_folder(tmp_path, monkeypatch, small_build, record_of):
    """What a killed writer left is looked for in the staging folder only: the bundle folder holds 4 files per bundle
    for years, and listing it cost every write 0.27 s at 100,000 bundles."""
    import os

    folder = tmp_path / "bundles"
    folder.mkdir()
    for i in range(50):  # other bundles' files
        (folder / f"m{i}-v1.0-rtx1.7-cpu-aot.tar.gz").write_bytes(b"")
    write_bundle(small_build, folder, record=None, environment={"schema": 1})  # the staging folder exists now
    listed: list[Path] = []
    real = {name: getattr(os, name) for name in ("scandir", "listdir")}
    for name, fn in real.items():
        monkeypatch.setattr(os, name, lambda path=".", _fn=fn: listed.append(Path(path)) or _fn(path))
    for name in ("glob", "iterdir"):
        method = getattr(Path, name)
        monkeypatch.setattr(Path, name, lambda self, *a, _m=method: listed.append(self) or _m(self, *a))
    info = write_bundle(small_build, folder, record=record_of(small_build), environment={"schema": 1})
    monkeypatch.undo()
    assert info.path.parent == folder and info.path.stat().st_size == info.size
    assert folder not in listed and folder / ".writing" in listed, listed
    assert list((folder / ".writing").iterdir()) == [], "the temporary file was left behind"


def test_members_hold_the_evidence(tmp_path, mnv2, record_of, environment):
    path = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment).path
    m = read_members(path)
    assert set(m) == {"engine.plan", "build.log.gz", "build.json", "config.json", "environment.json", "MANIFEST.sha256"}
    assert m["engine.plan"] == mnv2.engine
    assert gzip.decompress(m["build.log.gz"]).decode() == mnv2.log_text()  # the raw log, unchanged
    build = json.loads(m["build.json"])
    assert build["bundle_schema"] == b.BUNDLE_SCHEMA
    assert build["build"]["engine_sha256"] == mnv2.engine_sha256
    assert len(build["record"]["layers"]) == len(record_of(mnv2).layers) > 0
    config = json.loads(m["config.json"])
    assert config["pinned"]["name"] == "mobilenet_v2" and config["config_hash"] == mnv2.config_hash
    assert json.loads(m["environment.json"])["backend"]["version"] == RTX_VERSION
    lines = m["MANIFEST.sha256"].decode().splitlines()
    assert [line.split("  ")[1] for line in lines] == sorted(set(m) - {"MANIFEST.sha256"})


def test_engine_can_be_left_out(tmp_path, mnv2, record_of, environment):
    info = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment, include_engine=False)
    m = read_members(info.path)
    assert "engine.plan" not in m
    assert m["engine.plan.sha256"] == f"{mnv2.engine_sha256}  engine.plan\n".encode()
    assert info.size < len(mnv2.engine) / 4
    assert verify_bundle(info.path).engine_size is None


def test_calibration_and_golden_members(signed_bundle, mnv2):
    m = read_members(signed_bundle)
    assert m["calibration.cache"].startswith(b"TRT-8601-EntropyCalibration2")
    calib = json.loads(m["calibration.json"])
    assert calib["qdq_model_sha256"] == "ab" * 32 and len(calib["cache_sha256"]) == 64
    assert json.loads(m["golden.json"])["checks"]["tests/test_m.py::test_a"]["verdict"] == "pass"
    assert "MANIFEST.sha256.sig" in m


def test_bundle_without_record_still_verifies(tmp_path, mnv2, environment):
    path = write_bundle(mnv2, tmp_path, record=None, environment=environment).path
    assert verify_bundle(path).record() is None


def test_rewrite_replaces_atomically(tmp_path, mnv2, record_of, environment):
    first = write_bundle(mnv2, tmp_path, record=None, environment=environment)
    second = write_bundle(mnv2, tmp_path, record=record_of(mnv2), environment=environment)
    assert first.path == second.path and first.sha256 != second.sha256
    from pytest_trt.audit.sidecar import sidecar_path

    assert sorted(p.name for p in Path(tmp_path).iterdir()) == sorted([first.path.name, sidecar_path(first.path).name,
                                                                       ".writing"])
    assert list((tmp_path / ".writing").iterdir()) == []


def test_reported_sha256_and_size_are_the_file_on_disk(tmp_path, mnv2, record_of, environment):
    """The bundle's sha256 is hashed from the written chunks (on a thread, during fsync): it must be the file's."""
    import hashlib

    info = write_bundle(mnv2, tmp_path / "b", record=record_of(mnv2), environment=environment)
    data = info.path.read_bytes()
    assert (info.sha256, info.size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert len(data) > len(mnv2.engine)  # positive control: the engine is in it
    # and the log member and the cache entry's build.log both hold the log's bytes (made once, shared),
    # spelled independently: "[SEVERITY] " before each message's first line, continuation lines as they are
    expected = "".join(f"[{e.severity}] {e.text}\n" for e in mnv2.log).encode("utf-8")
    entry = tmp_path / "entry"
    mnv2.write(entry)
    assert gzip.decompress(read_members(info.path)["build.log.gz"]) == (entry / "build.log").read_bytes() == expected
