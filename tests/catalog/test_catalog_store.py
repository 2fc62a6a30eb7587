"""Catalog round trip on real bundles: every field, idempotence, supersession, refusal, migrations."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tarfile
from pathlib import Path

import pytest

from pytest_trt.catalog.database import MIGRATIONS, SCHEMA_VERSION, CatalogError, connect
from pytest_trt.catalog.store import Catalog
from tests.catalog.conftest import CACHE, set_created, verdict
from tests.conftest import RTX_VERSION


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _member(path: Path, name: str) -> bytes:
    with tarfile.open(path, "r:gz") as tar:
        return tar.extractfile(name).read()  # type: ignore[union-attr]


def test_rtx_bundle_round_trip(tmp_path, rtx_result, write):
    golden = {"t.py::test_acc": verdict(rtx_result, "fail", golden="goldens/mnv2.h5", generation=3,
                                        metrics={"l2_delta": 0.18, "top1_drop": -14.7}),
              "t.py::test_refresh": verdict(rtx_result, "updated", golden="goldens/mnv2.h5", generation=4,
                                            approver="Ada <ada@example.com>", reason="TensorRT upgrade")}
    path = write(rtx_result, tmp_path / "b", golden=golden, calibration=True)
    set_created(path, "2026-03-02T10:00:00Z")
    with Catalog(tmp_path / "c.sqlite") as cat:
        [res] = cat.add_paths([tmp_path / "b"])
        assert res.status == "added"
        [row] = cat.find(_sha(path.read_bytes()))
        details = cat.details(row["sha256"])
    assert row["path"] == str(path.resolve())
    assert row["size"] == path.stat().st_size
    assert (row["config_name"], row["config_version"]) == ("mnv2", "1.0")
    assert (row["backend"], row["backend_version"]) == ("tensorrt-rtx", RTX_VERSION)
    assert row["device"] == "cpu-aot"
    assert row["engine_sha256"] == _sha(rtx_result.engine) and row["engine_included"] == 1
    assert row["onnx_sha256"] == rtx_result.onnx_sha256
    assert row["config_hash"] == rtx_result.config_hash
    assert row["config_sha256"] == _sha(_member(path, "config.json"))
    assert row["calibration_algorithm"] == "minmax"
    assert row["calibration_cache_sha256"] == _sha(CACHE)
    env = json.loads(_member(path, "environment.json"))
    assert row["cuda_runtime"] == env["cuda"]["runtime"] and row["cuda_driver"] == env["cuda"]["driver"]
    assert row["created"] == "2026-03-02T10:00:00Z"
    assert row["signer_key_sha256"] is None and row["superseded_by"] is None
    verdicts = {v["test"]: v for v in details["verdicts"]}
    assert verdicts["t.py::test_acc"]["verdict"] == "fail"
    assert verdicts["t.py::test_acc"]["metrics"] == {"l2_delta": 0.18, "top1_drop": -14.7}
    assert verdicts["t.py::test_acc"]["generation"] == 3
    [approval] = details["approvals"]
    assert approval == {"bundle_sha256": row["sha256"], "test": "t.py::test_refresh", "golden": "goldens/mnv2.h5",
                        "generation": 4, "approver": "Ada <ada@example.com>", "reason": "TensorRT upgrade"}


def test_ort_bundle_round_trip_and_absent_calibration(tmp_path, ort_result, write):
    import onnxruntime

    path = write(ort_result, tmp_path)
    with Catalog(tmp_path / "c.sqlite") as cat:
        assert [r.status for r in cat.add_paths([path])] == ["added"]
        [row] = cat.find(_sha(path.read_bytes()))
    assert (row["config_name"], row["config_version"]) == ("cbr", "2.1")
    assert (row["backend"], row["backend_version"]) == ("onnxruntime", onnxruntime.__version__)
    assert row["calibration_algorithm"] is None and row["calibration_cache_sha256"] is None
    assert row["engine_sha256"] == _sha(ort_result.engine)


def test_git_commit_and_dirty_flag(tmp_path, rtx_result, write, environment):
    env = {**environment, "git": {"commit": "a" * 40, "dirty": True}}
    path = write(rtx_result, tmp_path, env=env)
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        [row] = cat.find(_sha(path.read_bytes()))
    assert (row["git_commit"], row["git_dirty"]) == ("a" * 40, 1)


def test_same_bundle_twice_is_one_row(tmp_path, rtx_result, write):
    path = write(rtx_result, tmp_path)
    with Catalog(tmp_path / "c.sqlite") as cat:
        first = cat.add_paths([path, tmp_path])
        second = cat.add_paths([path])
        assert [r.status for r in first] == ["added", "known"]
        assert [r.status for r in second] == ["known"]
        assert cat.count() == 1


def test_rewritten_bundle_supersedes_the_old_row(tmp_path, rtx_result, write):
    path = write(rtx_result, tmp_path)
    old = _sha(path.read_bytes())
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        write(rtx_result, tmp_path, golden={"t.py::a": verdict(rtx_result, "pass")})  # the recorder's rewrite
        new = _sha(path.read_bytes())
        cat.add_paths([path])
        assert cat.find(old)[0]["superseded_by"] == new
        assert cat.find(new)[0]["superseded_by"] is None


def test_tampered_bundle_is_refused(tmp_path, rtx_result, write):
    from tests.audit.conftest import read_members, rebuild

    path = write(rtx_result, tmp_path)
    members = read_members(path)
    members["config.json"] = members["config.json"].replace(b'"version":"1.0"', b'"version":"9.9"')
    bad = tmp_path / "tampered.tar.gz"
    bad.write_bytes(rebuild(members))
    with Catalog(tmp_path / "c.sqlite") as cat:
        [res] = cat.add_paths([bad])
        assert res.status == "refused"
        assert "config.json" in str(res.reason) and "sha256 mismatch" in str(res.reason)
        assert cat.count() == 0


def test_signer_key_id_is_indexed(tmp_path, rtx_result, write):
    pytest.importorskip("cryptography", reason="signing needs cryptography (pip install 'pytest-trt[sign]')")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    pem = tmp_path / "k.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pub = tmp_path / "k.pub"
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    path = write(rtx_result, tmp_path / "b", sign_key=pem)
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path], public_key=pub)
        [row] = cat.find(_sha(path.read_bytes()))
    assert row["signature_checked"] == 1
    assert row["signer_key_sha256"] == json.loads(_member(path, "MANIFEST.sha256.sig"))["public_key_sha256"]
    assert len(row["signer_key_sha256"]) == 64


def test_migration_from_version_1_keeps_rows(tmp_path):
    db = tmp_path / "c.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(MIGRATIONS[0] + "; PRAGMA user_version = 1;")
    conn.execute("INSERT INTO bundles (sha256, path, size, engine_sha256, engine_included, created, indexed) "
                 "VALUES ('ab', '/x.tar.gz', 1, 'cd', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')")
    conn.commit()
    conn.close()
    conn2 = connect(db)
    assert conn2.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    assert conn2.execute("SELECT sha256 FROM bundles").fetchall()[0][0] == "ab"
    # the rows of a catalog older than attestations have no build times: NULL, never invented
    assert tuple(conn2.execute("SELECT build_started, build_finished, attestations FROM bundles").fetchone()) == (
        None, None, None)
    assert conn2.execute("SELECT count(*) FROM pushes").fetchone()[0] == 0
    assert conn2.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn2.close()


def test_newer_schema_and_non_database_are_refused(tmp_path):
    db = tmp_path / "new.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(CatalogError, match=r"schema version 99 is newer than this pytest-trt reads \(5\)"):
        connect(db)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CatalogError, match="not a usable catalog database"):
        connect(junk)



def test_approval_survives_the_recorders_rewrite(tmp_path, rtx_result, write, capsys):
    """The recorder keeps only the latest verdict per test in the file; the catalog keeps the approval."""
    from datetime import timedelta

    from pytest_trt.catalog.prune import candidates, plan_prune, references
    from pytest_trt.cli import main
    from tests.catalog.test_catalog_prune import NOW

    folder = tmp_path / "trt-bundles"
    db = str(folder / "catalog.sqlite")
    path = write(rtx_result, folder, golden={"t.py::acc": verdict(rtx_result, "updated", golden="g/m.h5",
                                                                  generation=1)})
    set_created(path, "2025-01-01T00:00:00Z")
    assert main(["catalog", "add", str(path), "--db", db]) == 0
    write(rtx_result, folder, golden={"t.py::acc": verdict(rtx_result, "pass", golden="g/m.h5", generation=1)})
    set_created(path, "2025-01-02T00:00:00Z")
    assert main(["catalog", "add", str(path), "--db", db]) == 0
    assert json.loads(_member(path, "golden.json"))["checks"]["t.py::acc"]["verdict"] == "pass"
    capsys.readouterr()
    assert main(["catalog", "query", "--verdict", "updated", "--db", db, "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["bundles"]
    assert row["sha256"] == _sha(path.read_bytes()) and row["verdicts"] == "pass,updated" and row["approvals"] == 1
    assert main(["catalog", "history", "mnv2", "--db", db]) == 0
    assert "  approval: g/m.h5 generation 1" in capsys.readouterr().out
    with Catalog(Path(db)) as cat:
        plan = plan_prune(candidates(cat), references(cat), keep_last=0, older_than=timedelta(days=1), now=NOW)
    assert plan.delete == ()
    assert any(r.startswith("approval: g/m.h5 generation 1") for r in plan.keep[_sha(path.read_bytes())])


def test_approver_and_reason_come_from_the_golden_folders_approvals_log(tmp_path, rtx_result, write):
    from pytest_trt.golden.approvals import append_jsonl

    golden_dir = tmp_path / "golden"
    golden_dir.mkdir()
    for generation, who in ((1, "Bob"), (2, "Ada Lovelace <ada@example.com>")):
        append_jsonl(golden_dir, {"file": "mnv2.h5", "generation": generation, "approver": who,
                                  "reason": f"refresh {generation}", "test": "t.py::acc", "config": "mnv2"})
    path = write(rtx_result, tmp_path / "b", golden={"t.py::acc": verdict(
        rtx_result, "updated", golden=str(golden_dir / "mnv2.h5"), generation=2)})
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        [approval] = cat.details(_sha(path.read_bytes()))["approvals"]
    assert (approval["approver"], approval["reason"]) == ("Ada Lovelace <ada@example.com>", "refresh 2")


@pytest.mark.parametrize(("build", "expected"), [
    ({"backend": "tensorrt", "backend_version": "10.3.0.26", "versions": {"tensorrt": "8.6.1.6"}}, "10.3.0.26"),
    ({"backend": "tensorrt-rtx", "versions": {"backend": "tensorrt-rtx", "tensorrt_rtx": "1.7.1.116"}}, "1.7.1.116"),
    ({"backend": "onnxruntime", "versions": {"backend": "onnxruntime", "onnxruntime": "1.23.2"}}, "1.23.2"),
    ({"backend": "onnxruntime", "versions": {"backend_version": "1.20.1"}}, "1.20.1"),
    ({"backend": "tensorrt", "versions": {"backend": "tensorrt"}}, ""),
])
def test_backend_version_typed_field_first_then_the_versions_table(build, expected):
    from pytest_trt.common.backend_version import backend_version_of

    assert backend_version_of(build) == expected


@pytest.fixture
def verifies(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths ``verify_bundle`` is called with, from here on."""
    import pytest_trt.audit.verify as verify

    calls: list[Path] = []
    real = verify.verify_bundle

    def counting(path: Path, **kw: object) -> object:
        calls.append(Path(path))
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(verify, "verify_bundle", counting)
    return calls


def test_known_unchanged_bundles_are_not_read_again(tmp_path, rtx_result, write, verifies):
    for version in ("1.0", "1.1"):
        write(rtx_result, tmp_path / "b", version=version)
    with Catalog(tmp_path / "c.sqlite") as cat:
        first = cat.add_paths([tmp_path / "b"])
        assert [r.status for r in first] == ["added", "added"] and len(verifies) == 2
        again = cat.add_paths([tmp_path / "b"])
    assert [(r.status, r.sha256) for r in again] == [("known", r.sha256) for r in first]
    assert len(verifies) == 2  # nothing verified the second time


def test_a_byte_edited_in_place_with_its_mtime_restored_is_verified_and_refused(tmp_path, rtx_result, write,
                                                                                 verifies):
    import os

    path = write(rtx_result, tmp_path / "b")
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        st = os.stat(path)
        os.chmod(path, 0o644)
        with open(path, "r+b") as fh:  # same size, same inode
            fh.seek(st.st_size // 2)
            byte = fh.read(1)
            fh.seek(st.st_size // 2)
            fh.write(bytes([byte[0] ^ 0xFF]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (os.stat(path).st_size, os.stat(path).st_mtime_ns, os.stat(path).st_ino) == (
            st.st_size, st.st_mtime_ns, st.st_ino)
        [res] = cat.add_paths([path])
    assert res.status == "refused" and len(verifies) == 2


def test_a_touched_bundle_is_verified_once_then_known(tmp_path, rtx_result, write, verifies):
    import os

    path = write(rtx_result, tmp_path / "b")
    with Catalog(tmp_path / "c.sqlite") as cat:
        [first] = cat.add_paths([path])
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        assert [r.status for r in cat.add_paths([path])] == ["known"] and len(verifies) == 2
        assert [r.status for r in cat.add_paths([path])] == ["known"] and len(verifies) == 2  # the new stat kept
        # a row indexed before the catalog kept file identities (or by a writer that lost the race) has none
        cat.conn.execute("UPDATE bundles SET mtime_ns = NULL, ctime_ns = NULL, inode = NULL, members_sha256 = NULL")
        assert [r.sha256 for r in cat.add_paths([path])] == [first.sha256] and len(verifies) == 3
        assert [r.sha256 for r in cat.add_paths([path])] == [first.sha256] and len(verifies) == 3


def test_a_rewritten_bundle_is_verified_and_added(tmp_path, rtx_result, write, verifies):
    path = write(rtx_result, tmp_path / "b")
    with Catalog(tmp_path / "c.sqlite") as cat:
        [old] = cat.add_paths([path])
        write(rtx_result, tmp_path / "b", golden={"t.py::a": verdict(rtx_result, "fail")})  # the recorder's rewrite
        [new] = cat.add_paths([path])
        assert new.status == "added" and new.sha256 == _sha(path.read_bytes()) != old.sha256
        assert cat.find(old.sha256 or "")[0]["superseded_by"] == new.sha256
        assert len(verifies) == 2


def test_a_sidecar_naming_another_file_forces_verification(tmp_path, rtx_result, write, verifies):
    from pytest_trt.audit.sidecar import read_state, sidecar_path

    path = write(rtx_result, tmp_path / "b")
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        side = sidecar_path(path)
        doc = json.loads(side.read_text())
        doc["sha256"] = "0" * 64
        side.write_text(json.dumps(doc))
        assert read_state(path) is not None  # the sidecar still describes the file on disk
        assert [r.status for r in cat.add_paths([path])] == ["known"]
    assert len(verifies) == 2


def test_a_row_indexed_without_the_key_is_verified_under_public_key(tmp_path, rtx_result, write, verifies):
    pytest.importorskip("cryptography", reason="signing needs cryptography (pip install 'pytest-trt[sign]')")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    pem, pub = tmp_path / "k.pem", tmp_path / "k.pub"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    path = write(rtx_result, tmp_path / "b", sign_key=pem)
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        assert cat.find(_sha(path.read_bytes()))[0]["signature_checked"] == 0 and len(verifies) == 1
        assert [r.status for r in cat.add_paths([path], public_key=pub)] == ["known"] and len(verifies) == 2
        assert cat.find(_sha(path.read_bytes()))[0]["signature_checked"] == 0  # INSERT OR IGNORE kept the row
        assert [r.status for r in cat.add_paths([path])] == ["known"] and len(verifies) == 2
