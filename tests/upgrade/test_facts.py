"""upgrade-report reads verified facts of unchanged bundles, and verifies everything else once.

Bundles are written by the real writer from a real TensorRT-RTX build (engine included); the reference for the
facts is ``verify_bundle`` of the same file and the report made with ``--reverify``.
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit.facts import FactsReader, read_members
from pytest_trt.audit.sidecar import members_digest, sidecar_path, write_state
from pytest_trt.audit.verify import verify_bundle
from pytest_trt.cli import main
from pytest_trt.upgrade.model import NOT_COMPARED, UNCHANGED
from pytest_trt.upgrade.pairing import catalog_lookup
from pytest_trt.upgrade.report import make_report
from tests.catalog.conftest import environment, rtx_result, verdict, write  # noqa: F401 - fixtures

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


@pytest.fixture
def runs(tmp_path: Path, rtx_result: Any, write: Any) -> tuple[Path, Path]:  # noqa: F811
    old, new = tmp_path / "old", tmp_path / "new"
    for version in ("1.0", "1.1"):
        write(rtx_result, old, version=version, golden={"t.py::acc": verdict(rtx_result, "pass")})
        write(rtx_result, new, version=version, golden={"t.py::acc": verdict(rtx_result, "fail")})
    return old, new


@pytest.fixture
def verifies(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    import pytest_trt.audit.facts as facts

    calls: list[Path] = []

    def counting(path: Path, **kw: Any) -> Any:
        calls.append(Path(path))
        return verify_bundle(path, **kw)

    monkeypatch.setattr(facts, "verify_bundle", counting)
    return calls


def _doc(report: Any) -> str:
    return json.dumps(report.to_dict(), sort_keys=True, default=str)


def test_unchanged_bundles_are_read_from_their_sidecars_and_the_report_is_the_same(runs, verifies):
    old, new = runs
    reader = FactsReader()
    facts = make_report(str(old), str(new), reader=reader)
    assert (reader.from_facts, reader.verified, verifies) == (4, 0, [])
    reverified = FactsReader(reverify=True)
    assert _doc(facts) == _doc(make_report(str(old), str(new), reader=reverified))
    assert (reverified.from_facts, reverified.verified, len(verifies)) == (0, 4, 4)


def test_the_facts_equal_the_verifiers_members(runs):
    path = sorted(runs[0].glob("*.tar.gz"))[0]
    vb = verify_bundle(path)
    facts = FactsReader().read(path)
    assert dict(facts.members) == dict(vb.members) and dict(facts.docs) == dict(vb.docs)
    assert facts.sha256 == vb.sha256 and dict(facts.member_sha256) == dict(vb.member_sha256)
    assert facts.engine_sha256 == vb.engine_sha256


def test_the_engine_is_skipped_not_read(runs, monkeypatch):
    """The engine's stored gzip member is passed by a seek: far fewer bytes are read than the file holds."""
    import pytest_trt.audit.facts as facts

    path = sorted(runs[0].glob("*.tar.gz"))[0]
    seeks: list[bool] = []
    real = facts._Inflater._seek_stored

    def recording(self: Any, start: int, n: int) -> bool:
        seeks.append(real(self, start, n))
        return seeks[-1]

    monkeypatch.setattr(facts._Inflater, "_seek_stored", recording)
    read = 0
    real_read = facts._Inflater._feed

    def counting(self: Any) -> bool:
        nonlocal read
        before = self.fh.tell()
        more = real_read(self)
        read += max(0, self.fh.tell() - before)
        return more

    monkeypatch.setattr(facts._Inflater, "_feed", counting)
    members, _ = read_members(path)
    assert seeks == [True] and "engine.plan" not in members
    assert read < path.stat().st_size / 4, (read, path.stat().st_size)


def test_a_bundle_touched_after_its_sidecar_is_verified_once_in_both_runs(runs, verifies):
    path = sorted(runs[0].glob("*.tar.gz"))[0]
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    reader = FactsReader()
    make_report(str(path), str(path), reader=reader)
    assert verifies == [path] and reader.from_facts == 0


def test_a_grown_bundle_is_verified(runs, verifies):
    path = sorted(runs[0].glob("*.tar.gz"))[0]
    path.chmod(0o644)
    with open(path, "ab") as fh:
        fh.write(b"\0")
    reader = FactsReader()
    report = make_report(str(path), str(path), reader=reader)
    assert verifies == [path] and reader.verified == 1  # a file that fails is verified once too
    assert [r.verdict for r in report.reviews] == [NOT_COMPARED]


def test_a_members_digest_other_than_the_manifests_means_a_full_verify(runs, verifies):
    path = sorted(runs[0].glob("*.tar.gz"))[0]
    doc = json.loads(sidecar_path(path).read_text())
    doc["members_sha256"] = "0" * 64
    sidecar_path(path).write_text(json.dumps(doc))
    reader = FactsReader()
    reader.read(path)
    assert verifies == [path] and reader.from_facts == 0


def test_a_tampered_member_under_a_forged_sidecar_is_unusable(runs, verifies):
    from tests.audit.conftest import read_members as tar_members
    from tests.audit.conftest import rebuild

    old, new = runs
    path = sorted(new.glob("*.tar.gz"))[0]
    members = tar_members(path)
    members["config.json"] = members["config.json"].replace(b'"precision"', b'"precisioN"')
    path.chmod(0o644)
    path.write_bytes(rebuild(members))
    # a sidecar that vouches for the file as it is now, with the (unchanged) manifest's digest
    write_state(path, members_sha256=members_digest(members["MANIFEST.sha256"], None), sha256="0" * 64,
                size=path.stat().st_size, engine_sha256="0" * 64, golden=None, inputs_sha256=None)
    with pytest.raises(ValueError, match="config.json: sha256 differs from the manifest"):
        read_members(path)
    report = make_report(str(old), str(new))
    assert [r.verdict for r in report.reviews] == [NOT_COMPARED, UNCHANGED]  # v1.0 of the new run is unusable
    assert verifies == [path]


def test_an_earlier_one_member_bundle_reads_the_same(tmp_path, runs):
    from tests.audit.conftest import read_members as tar_members
    from tests.audit.test_stored_engine import _legacy_writer

    current = sorted(runs[0].glob("*.tar.gz"))[0]
    legacy = tmp_path / "legacy" / current.name
    legacy.parent.mkdir()
    members = tar_members(current)
    legacy.write_bytes(_legacy_writer(members))
    vb = verify_bundle(legacy)
    write_state(legacy, members_sha256=members_digest(members["MANIFEST.sha256"], None), sha256=vb.sha256,
                size=legacy.stat().st_size, engine_sha256=vb.engine_sha256, golden=None, inputs_sha256=None)
    reader = FactsReader()
    facts = reader.read(legacy)
    assert reader.from_facts == 1 and dict(facts.docs) == dict(vb.docs) and dict(facts.members) == dict(vb.members)


def test_the_catalog_row_is_a_verified_fact(tmp_path, runs, verifies):
    from pytest_trt.catalog.store import Catalog

    old, new = runs
    db = tmp_path / "catalog.sqlite"
    with Catalog(db) as cat:
        cat.add_paths([old, new])
    for path in [*old.glob("*.tar.gz"), *new.glob("*.tar.gz")]:
        sidecar_path(path).unlink()
    reader = FactsReader(lookup=catalog_lookup(db))
    make_report(str(old), str(new), reader=reader)
    assert (reader.from_facts, reader.verified, verifies) == (4, 0, [])
    path = sorted(old.glob("*.tar.gz"))[0]
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # changed since the catalog verified it
    reader = FactsReader(lookup=catalog_lookup(db))
    make_report(str(old), str(new), reader=reader)
    assert (reader.from_facts, reader.verified, verifies) == (3, 1, [path])


def test_the_command_says_how_bundles_were_read(runs, capsys, tmp_path, monkeypatch):
    old, new = runs
    monkeypatch.chdir(tmp_path)
    assert main(["upgrade-report", str(old), str(new), "--no-html", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bundles_read"] == {"from_verified_facts": 4, "verified_now": 0}
    main(["upgrade-report", str(old), str(new), "--no-html", "--reverify", "--json"])
    assert json.loads(capsys.readouterr().out)["bundles_read"] == {"from_verified_facts": 0, "verified_now": 4}
    assert gc.isenabled()  # the collector, paused while bundles are read and reviewed, is back on
