"""Retention: prune never deletes referenced evidence (property-tested), prints why it keeps; file modes."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_trt.catalog.fields import ApprovalRef, CatalogEntry, Verdict
from pytest_trt.catalog.prune import apply_prune, candidates, plan_prune, references
from pytest_trt.catalog.store import Catalog
from pytest_trt.cli import main
from tests.catalog.conftest import set_created, verdict

hypothesis = pytest.importorskip("hypothesis", reason="property tests need hypothesis (pip install 'pytest-trt[test]')")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def _entry(i: int, path: Path, config: str, day: int, verdicts: tuple[Verdict, ...]) -> CatalogEntry:
    data = f"bundle {i}".encode()
    path.write_bytes(data)
    approvals = tuple(ApprovalRef(v.test, v.golden, v.generation, "ada", "ok") for v in verdicts
                      if v.verdict == "updated")
    return CatalogEntry(
        sha256=hashlib.sha256(data).hexdigest(), path=str(path), size=len(data), config_name=config,
        config_version="1", backend="tensorrt-rtx", backend_version="1.7", cuda_runtime=None, cuda_driver=None,
        device="cpu-aot", device_json="{}", engine_sha256=f"{i:064x}", engine_included=True, onnx_sha256=None,
        config_hash=None, config_sha256=None, calibration_algorithm=None, calibration_cache_sha256=None,
        git_commit=None, git_dirty=None, created=(NOW - timedelta(days=day)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        signer_key_sha256=None, signature_checked=False, verdicts=verdicts, approvals=approvals)


verdict_st = st.tuples(st.sampled_from(["pass", "fail", "updated", "tainted"]),
                       st.sampled_from(["g/a.h5", "g/b.h5", None]), st.integers(1, 3))
bundle_st = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 400),
                      st.lists(verdict_st, max_size=2), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(bundle_st, min_size=1, max_size=14), keep_last=st.one_of(st.none(), st.integers(0, 3)),
       older=st.one_of(st.none(), st.integers(0, 300)))
@example(history=[("a", 5, [], False)], keep_last=None, older=5)  # created exactly at the cutoff: kept
def test_prune_keeps_every_referenced_bundle(history, keep_last, older):
    if keep_last is None and older is None:
        keep_last = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        entries, registered = [], set()
        for i, (config, day, vs, reg) in enumerate(history):
            verdicts = tuple(Verdict(f"t.py::t{j}", v, g, gen if g else None, None, {})
                             for j, (v, g, gen) in enumerate(vs))
            entries.append(_entry(i, folder / f"{i}.tar.gz", config, day, verdicts))
            if reg:
                registered.add(entries[-1].sha256)
        with Catalog(folder / "c.sqlite") as cat:
            cat.add_entries(entries)
            for sha in registered:
                cat.record_registration(sha, uri="http://x", model_name="m", model_version="1", when="t")
            older_td = timedelta(days=older) if older is not None else None
            plan = plan_prune(candidates(cat), references(cat), keep_last=keep_last, older_than=older_td, now=NOW)
            apply_prune(cat, plan, when="t")
            pruned = {r["sha256"] for r in cat.rows("SELECT sha256 FROM bundles WHERE pruned IS NOT NULL")}
        on_disk = {e.sha256 for e in entries if Path(e.path).exists()}
    # what must survive, computed from the generated history alone
    must: set[str] = set(registered)
    newest_check: dict[tuple[str, int], CatalogEntry] = {}
    for e in entries:
        for v in e.verdicts:
            if v.verdict == "updated":
                must.add(e.sha256)
            if v.golden is not None:
                key = (v.golden, v.generation or 0)
                if key not in newest_check or (e.created, e.sha256) > (newest_check[key].created,
                                                                        newest_check[key].sha256):
                    newest_check[key] = e
    must |= {e.sha256 for e in newest_check.values()}
    by_config: dict[str, list[CatalogEntry]] = {}
    for e in entries:
        by_config.setdefault(str(e.config_name), []).append(e)
    if keep_last:
        for group in by_config.values():
            must |= {e.sha256 for e in sorted(group, key=lambda e: (e.created, e.sha256))[-keep_last:]}
    if older is not None:
        cutoff = (NOW - timedelta(days=older)).strftime("%Y-%m-%dT%H:%M:%SZ")
        must |= {e.sha256 for e in entries if e.created >= cutoff}
    assert not (must & pruned), "a protected bundle was deleted"
    assert pruned == {e.sha256 for e in entries} - must, "an unprotected bundle was kept"
    assert on_disk == {e.sha256 for e in entries} - pruned


def test_prune_cli_prints_what_it_keeps_and_why(tmp_path, rtx_result, write, capsys):
    folder = tmp_path / "trt-bundles"
    old_approved = write(rtx_result, folder, version="1.0", golden={
        "t.py::acc": verdict(rtx_result, "updated", golden="g/m.h5", generation=1, approver="Ada")})
    old_plain = write(rtx_result, folder, version="1.1")
    old_checked = write(rtx_result, folder, version="1.2", golden={
        "t.py::acc": verdict(rtx_result, "pass", golden="g/m.h5", generation=1)})
    new = write(rtx_result, folder, version="1.3")
    for p, day in ((old_approved, "2025-01-01"), (old_plain, "2025-01-02"), (old_checked, "2025-01-03"),
                   (new, "2026-11-30")):
        set_created(p, day + "T00:00:00Z")
    db = str(folder / "catalog.sqlite")
    assert main(["catalog", "add", str(folder), "--db", db]) == 0
    capsys.readouterr()
    assert main(["catalog", "prune", "--keep-last", "1", "--older-than", "180d", "--dry-run", "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"KEEP    {old_approved.resolve()}  (approval: g/m.h5 generation 1 refreshed from it by Ada" in out
    assert f"KEEP    {old_checked.resolve()}  (golden history: newest check against g/m.h5 generation 1)" in out
    assert f"KEEP    {new.resolve()}  (newest of config mnv2: no. 1 of --keep-last 1; younger than" in out
    assert f"WOULD DELETE  {old_plain.resolve()}  (config mnv2, created 2025-01-02T00:00:00Z" in out
    assert old_plain.exists()
    # --json, like every command (the README: "--json everywhere")
    assert main(["catalog", "prune", "--keep-last", "1", "--older-than", "180d", "--dry-run", "--db", db,
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["path"] for d in doc["delete"]] == [str(old_plain.resolve())] and doc["deleted"] is None
    assert {k["path"] for k in doc["keep"]} == {str(p.resolve()) for p in (old_approved, old_checked, new)}
    assert old_plain.exists()
    sidecars = {p: p.with_name(f".{p.name}.state.json") for p in (old_approved, old_plain, old_checked, new)}
    assert all(s.is_file() for s in sidecars.values())  # write_bundle leaves one beside each bundle
    assert main(["catalog", "prune", "--keep-last", "1", "--older-than", "180d", "--db", db]) == 0
    assert "deleted 1 bundle(s), kept 3" in capsys.readouterr().out
    assert not old_plain.exists() and old_approved.exists() and old_checked.exists() and new.exists()
    # the deleted bundle's sidecar goes with it; the kept bundles keep theirs
    assert [p for p, s in sidecars.items() if not s.exists()] == [old_plain]
    assert main(["catalog", "query", "--config", "mnv2", "--db", db, "--json"]) == 0
    assert old_plain.name not in capsys.readouterr().out
    assert main(["catalog", "query", "--all", "--config", "mnv2", "--db", db, "--json"]) == 0
    assert '"pruned": "20' in capsys.readouterr().out  # the row stays as a record of what existed


def test_prune_never_deletes_a_file_that_changed_since_indexing(tmp_path, rtx_result, write):
    path = write(rtx_result, tmp_path, version="1.0")
    set_created(path, "2020-01-01T00:00:00Z")
    with Catalog(tmp_path / "c.sqlite") as cat:
        cat.add_paths([path])
        write(rtx_result, tmp_path, version="1.0", golden={"t.py::x": verdict(rtx_result, "pass")})  # not indexed
        plan = plan_prune(candidates(cat), references(cat), keep_last=0, older_than=timedelta(days=1), now=NOW)
        outcome = apply_prune(cat, plan, when="t")
    assert outcome.deleted == () and "now holds other bytes" in outcome.skipped[0][1]
    assert path.exists() and path.with_name(f".{path.name}.state.json").is_file()  # its sidecar stays too


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file modes; checked through st_mode below instead")
def test_bundle_file_is_read_only_for_its_owner(tmp_path, rtx_result, write):  # pragma: no cover - non-root only
    path = write(rtx_result, tmp_path / "b")
    with pytest.raises(PermissionError):
        path.open("ab")


def test_modes_and_rewrite_over_a_read_only_bundle(tmp_path, rtx_result, write):
    folder = tmp_path / "trt-bundles"
    path = write(rtx_result, folder)
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    assert stat.S_IMODE(folder.stat().st_mode) == 0o750 & ~_umask()
    first = path.read_bytes()
    again = write(rtx_result, folder, golden={"t.py::a": verdict(rtx_result, "pass")})  # the recorder's rewrite
    assert again == path and path.read_bytes() != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    from pytest_trt.audit.sidecar import sidecar_path

    # no temporary file left behind (the hidden sidecar is written only by the recorder's path); the staging folder
    # where bundles are written is as private as the bundle folder
    names = sorted(p.name for p in folder.iterdir())
    assert names in (sorted([path.name, ".writing"]), sorted([path.name, sidecar_path(path).name, ".writing"]))
    assert list((folder / ".writing").iterdir()) == []
    assert stat.S_IMODE((folder / ".writing").stat().st_mode) == 0o750 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
