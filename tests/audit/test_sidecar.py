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
    def __init__(self, result: Any, record: Any) -> None:
        self.result, self.record, self.config = result, record, None


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
