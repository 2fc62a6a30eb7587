"""Bundles are not rewritten when an identical one exists, and that is known without a gunzip."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.audit import sidecar
from pytest_trt.audit.bundle import write_bundle
from pytest_trt.audit.recorder import AuditSettings, BundleRecorder
from pytest_trt.audit.verify import verify_bundle


def test_identical_bundle_is_kept_and_a_changed_one_rewritten(tmp_path: Path, mnv2: Any, record_of: Any,
                                                             environment: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"record": record_of(mnv2), "environment": environment, "reuse": True}
    first = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "pass"}}, **kwargs)
    st = os.stat(first.path)
    state = sidecar.read_state(first.path)
    assert state is not None and state.sha256 == first.sha256 and state.golden == {"t::a": {"verdict": "pass"}}
    again = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "pass"}}, **kwargs)
    assert again == first and os.stat(first.path).st_mtime_ns == st.st_mtime_ns  # not rewritten
    changed = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "fail"}}, **kwargs)
    assert changed.sha256 != first.sha256 and verify_bundle(changed.path).golden["t::a"]["verdict"] == "fail"
    without_reuse = write_bundle(mnv2, tmp_path, golden_results={"t::a": {"verdict": "fail"}},
                                 record=record_of(mnv2), environment=environment)
    assert without_reuse.sha256 == changed.sha256 and os.stat(changed.path).st_mtime_ns != st.st_mtime_ns


def test_a_bundle_changed_behind_the_sidecar_is_rewritten(tmp_path: Path, mnv2: Any, record_of: Any,
                                                         environment: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"record": record_of(mnv2), "environment": environment, "reuse": True}
    first = write_bundle(mnv2, tmp_path, **kwargs)
    data = bytearray(first.path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes, new mtime
    first.path.chmod(0o644)  # bundles are written read-only
    first.path.write_bytes(bytes(data))
    assert sidecar.read_state(first.path) is None
    again = write_bundle(mnv2, tmp_path, **kwargs)
    assert again.sha256 == first.sha256 and verify_bundle(again.path).engine_sha256 == mnv2.engine_sha256


class _Engine:
    """What the recorder reads of an Engine; ``artifact_dir`` set: an engine served from that cache entry."""

    def __init__(self, result: Any, record: Any, artifact_dir: Path | None = None) -> None:
        self.result, self.record, self.config = result, record, None
        self.cached, self.artifact_dir = artifact_dir is not None, artifact_dir


def test_cache_hit_session_neither_gunzips_nor_rewrites(tmp_path: Path, mnv2: Any, record_of: Any,
                                                        environment: dict[str, Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    settings = AuditSettings(bundle_dir=tmp_path, sign_key=None, include_engine=True, include_hostname=False,
                             rootdir=tmp_path)
    engine = _Engine(mnv2, record_of(mnv2))
    first = BundleRecorder(settings, backend="tensorrt-rtx", _environment=environment)
    first.golden[first.key(engine)] = {"t::a": {"verdict": "pass"}}  # type: ignore[arg-type]
    info = first.bundle(engine)  # type: ignore[arg-type]
    mtime = os.stat(info.path).st_mtime_ns

    def no_gunzip(path: Path, **kwargs: Any) -> Any:
        raise AssertionError(f"verify_bundle({path}) ran: the sidecar should have answered")

    monkeypatch.setattr("pytest_trt.audit.verify.verify_bundle", no_gunzip)
    second = BundleRecorder(settings, backend="tensorrt-rtx", _environment=environment)  # a new session, a hit
    assert second.bundle(engine).sha256 == info.sha256  # type: ignore[arg-type]
    assert os.stat(info.path).st_mtime_ns == mtime
    monkeypatch.undo()
    assert verify_bundle(info.path).golden == {"t::a": {"verdict": "pass"}}  # verdicts kept


def _cached_engine(tmp_path: Path, result: Any, record: Any) -> _Engine:
    from pytest_trt.engines.cache import EngineCache

    return _Engine(result, record, EngineCache(tmp_path / "cache").store("ab" * 32, result))


def _settings(folder: Path) -> AuditSettings:
    return AuditSettings(bundle_dir=folder, sign_key=None, include_engine=True, include_hostname=False,
                         rootdir=folder)


def _no_content(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("bundle_members ran: the sidecar's inputs digest should have answered")


def test_cache_hit_keeps_the_bundle_without_building_its_content(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                 environment: dict[str, Any],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _cached_engine(tmp_path, mnv2, record_of(mnv2))
    info = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(engine)  # type: ignore[arg-type]
    state = sidecar.read_state(info.path)
    assert state is not None and state.inputs_sha256 is not None and len(state.inputs_sha256) == 64
    mtime = os.stat(info.path).st_mtime_ns
    monkeypatch.setattr("pytest_trt.audit.bundle.bundle_members", _no_content)
    monkeypatch.setattr("pytest_trt.audit.verify.verify_bundle", _no_content)
    monkeypatch.setattr("pytest_trt.common.fileio.acquire_lock", _no_content)  # reading needs no lock
    again = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(engine)  # type: ignore[arg-type]
    assert again == info and os.stat(info.path).st_mtime_ns == mtime


def test_changed_inputs_build_the_content_again(tmp_path: Path, mnv2: Any, record_of: Any,
                                                environment: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _cached_engine(tmp_path, mnv2, record_of(mnv2))
    info = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(engine)  # type: ignore[arg-type]
    other = {**environment, "python": {**environment.get("python", {}), "version": "0.0.0-other"}}
    changed = BundleRecorder(_settings(tmp_path / "b"), _environment=other).bundle(engine)  # type: ignore[arg-type]
    assert changed.sha256 != info.sha256
    assert verify_bundle(changed.path).environment["python"]["version"] == "0.0.0-other"
    # a new golden verdict changes the inputs too
    recorder = BundleRecorder(_settings(tmp_path / "b"), _environment=other)
    recorder.golden[recorder.key(engine)] = {"t::a": {"verdict": "pass"}}  # type: ignore[arg-type]
    with_golden = recorder.bundle(engine)  # type: ignore[arg-type]
    assert with_golden.sha256 != changed.sha256 and verify_bundle(with_golden.path).golden == {"t::a": {"verdict": "pass"}}


def test_same_content_from_a_fresh_build_records_its_inputs_once(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                  environment: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _Engine(mnv2, record_of(mnv2))  # just built: no cache entry to name the result by
    info = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(fresh)  # type: ignore[arg-type]
    state = sidecar.read_state(info.path)
    assert state is not None and state.inputs_sha256 is None
    mtime = os.stat(info.path).st_mtime_ns
    cached = _cached_engine(tmp_path, mnv2, record_of(mnv2))
    hit = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(cached)  # type: ignore[arg-type]
    state = sidecar.read_state(info.path)
    assert hit.sha256 == info.sha256 and os.stat(info.path).st_mtime_ns == mtime  # same bytes: not rewritten
    assert state is not None and state.inputs_sha256 is not None  # ... and the next hit needs no content
    monkeypatch.setattr("pytest_trt.audit.bundle.bundle_members", _no_content)
    assert BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(cached) == hit  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", ["tampered", "missing"])
def test_a_tampered_or_missing_bundle_is_rewritten_and_verifies(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                environment: dict[str, Any], damage: str) -> None:
    engine = _cached_engine(tmp_path, mnv2, record_of(mnv2))
    info = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(engine)  # type: ignore[arg-type]
    if damage == "missing":
        info.path.unlink()
    else:
        data = bytearray(info.path.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size: only the inode's ctime tells
        info.path.chmod(0o644)
        info.path.write_bytes(bytes(data))
    recorder = BundleRecorder(_settings(tmp_path / "b"), _environment=environment)
    again = recorder.bundle(engine)  # type: ignore[arg-type]
    assert again.sha256 == info.sha256 and verify_bundle(again.path).engine_sha256 == mnv2.engine_sha256
    if damage == "tampered":
        assert (tmp_path / "b" / (info.path.name + ".invalid")).is_file()
        assert len(recorder.failures) == 1 and "failed verification" in recorder.failures[0]
    else:
        assert recorder.failures == []


def test_a_fresh_build_settled_at_session_end_needs_no_content_on_the_next_hit(
        tmp_path: Path, mnv2: Any, record_of: Any, environment: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_trt.engines.cache import EngineCache

    entry = EngineCache(tmp_path / "cache").store("cd" * 32, mnv2)
    fresh = _Engine(mnv2, record_of(mnv2), entry)
    fresh.cached = False  # as the provider hands out a just-built engine: its entry was being written
    recorder = BundleRecorder(_settings(tmp_path / "b"), _environment=environment)
    info = recorder.bundle(fresh)  # type: ignore[arg-type]
    state = sidecar.read_state(info.path)
    assert state is not None and state.inputs_sha256 is None  # unknown while the entry may be incomplete
    mtime = os.stat(info.path).st_mtime_ns
    assert recorder.settle() == 1  # the session's cache writes are done: the entry names the result
    state = sidecar.read_state(info.path)
    assert state is not None and state.inputs_sha256 is not None and state.sha256 == info.sha256
    assert recorder.settle() == 0  # once

    monkeypatch.setattr("pytest_trt.audit.bundle.bundle_members", _no_content)
    monkeypatch.setattr("pytest_trt.audit.verify.verify_bundle", _no_content)
    hit = _Engine(mnv2, record_of(mnv2), entry)
    again = BundleRecorder(_settings(tmp_path / "b"), _environment=environment).bundle(hit)  # type: ignore[arg-type]
    assert again.sha256 == info.sha256 and os.stat(info.path).st_mtime_ns == mtime


def test_settle_leaves_a_bundle_changed_since_it_was_written(tmp_path: Path, mnv2: Any, record_of: Any,
                                                             environment: dict[str, Any]) -> None:
    from pytest_trt.engines.cache import EngineCache

    fresh = _Engine(mnv2, record_of(mnv2), EngineCache(tmp_path / "cache").store("ef" * 32, mnv2))
    fresh.cached = False
    recorder = BundleRecorder(_settings(tmp_path / "b"), _environment=environment)
    info = recorder.bundle(fresh)  # type: ignore[arg-type]
    os.chmod(info.path, 0o644)
    with open(info.path, "ab") as fh:
        fh.write(b"\0")  # edited after the write: its sidecar no longer describes it
    assert recorder.settle() == 0
    assert sidecar.read_state(info.path) is None


def _same_size_and_mtime(path: Path, data: bytes, *, in_place: bool) -> None:
    """Put ``data`` (as long as the file) at ``path`` and set its mtime back: a replaced file (another inode) or one
    edited in place (its ctime moves: os.utime cannot set it)."""
    st = os.stat(path)
    assert len(data) == st.st_size
    if in_place:
        path.chmod(0o644)
        while os.stat(path).st_ctime_ns == st.st_ctime_ns:  # a coarse clock: write until the ctime moves
            with open(path, "r+b") as fh:
                fh.write(data)
    else:
        other = path.with_name("replacement")
        other.write_bytes(data)
        os.replace(other, path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert (now.st_ino != st.st_ino) if not in_place else (now.st_ino == st.st_ino)
    assert now.st_ctime_ns != st.st_ctime_ns


@pytest.mark.parametrize("in_place", [False, True], ids=["replaced", "edited-in-place"])
def test_a_same_size_same_mtime_change_is_not_trusted_from_the_sidecar(tmp_path: Path, mnv2: Any, record_of: Any,
                                                                        environment: dict[str, Any],
                                                                        in_place: bool) -> None:
    kwargs: dict[str, Any] = {"record": record_of(mnv2), "environment": environment, "reuse": True}
    first = write_bundle(mnv2, tmp_path, **kwargs)
    original = first.path.read_bytes()
    assert sidecar.read_state(first.path) is not None
    changed = bytearray(original)
    changed[len(changed) // 2] ^= 0xFF
    _same_size_and_mtime(first.path, bytes(changed), in_place=in_place)
    assert sidecar.read_state(first.path) is None
    again = write_bundle(mnv2, tmp_path, **kwargs)  # not kept on the sidecar's word: verified, written again
    assert again.path.read_bytes() == original and verify_bundle(again.path).sha256 == first.sha256


def test_on_disk_reads_the_sidecar_only_while_it_describes_the_file(tmp_path: Path) -> None:
    import hashlib

    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(b"x" * 50)
    sidecar.write_state(bundle, members_sha256="m" * 64, sha256="s" * 64, size=50, engine_sha256="e" * 64,
                        golden=None, inputs_sha256=None)
    assert sidecar.on_disk(bundle) == ("s" * 64, 50)  # trusted: no read of the bundle
    bundle.write_bytes(b"y" * 60)  # replaced behind the sidecar's back: hashed
    assert sidecar.on_disk(bundle) == (hashlib.sha256(b"y" * 60).hexdigest(), 60)
    bundle.unlink()
    assert sidecar.on_disk(bundle) is None
