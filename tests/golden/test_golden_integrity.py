"""Golden integrity: output names with '/', hand edits, damaged bytes, the approval log as one unit with the file.

Goldens are written by the plugin itself (approved updates through real ONNX Runtime sessions), then damaged or
edited the way a bad merge, a partial checkout or a hand edit would.  ``tests/data/golden_v2/today.h5`` was
written by the code before these checks (nested groups for ``head/probs``, no digests): it must keep reading.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import onnx
import pytest
from golden_engines import OrtEngine, reseal
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from pytest_trt.common.filehash import sha256_file
from pytest_trt.config import BuildConfig, Profile
from pytest_trt.errors import ApprovalLogWarning, FolderUnusable, GoldenCorrupt
from pytest_trt.golden import digest_file, probe
from pytest_trt.golden.approvals import read_jsonl
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.store import GoldenFile
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, GoldenSettings, UpdateResult
from tests.fuzz import fuzz_settings

NAMES = ("out/y", "a%2Fb", "a/b", "a", ".dot", "plain")
TODAY = Path(__file__).parent.parent / "data" / "golden_v2"


def write_slash_model(path: Path) -> Path:
    """x (N, 4) -> outputs named as tf2onnx and friends do: 'out/y', 'a%2Fb', 'a/b', 'a' (beside 'a/b'), '.dot'."""
    w = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["out/y"], name="mm"),
             helper.make_node("Relu", ["out/y"], ["a%2Fb"], name="relu"),
             helper.make_node("Neg", ["out/y"], ["a/b"], name="neg"),
             helper.make_node("Abs", ["out/y"], [".dot"], name="abs"),
             helper.make_node("Sigmoid", ["out/y"], ["a"], name="sig"),
             helper.make_node("Identity", ["x"], ["plain"], name="id")]
    graph = helper.make_graph(nodes, "slash", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in NAMES],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.fixture
def slash(model_dir: Path) -> tuple[OrtEngine, GoldenDataset]:
    config = BuildConfig(name="slash", onnx=write_slash_model(model_dir / "slash.onnx"),
                         profiles=(Profile(x=((1, 4), (8, 4), (16, 4))),))
    x = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
    return OrtEngine(config), GoldenDataset.from_arrays({"x": x})


MakeGolden = Callable[..., GoldenCheck]


# -- output names with '/' ---------------------------------------------------------------------------------------

def test_output_names_with_slash_round_trip(golden: MakeGolden, golden_dir: Path,
                                            slash: tuple[OrtEngine, GoldenDataset]) -> None:
    engine, data = slash
    assert isinstance(golden(update=True, approve="first").check(engine, dataset=data), UpdateResult)
    result = golden().check(engine)
    assert isinstance(result, CheckResult) and set(result.metrics) == set(NAMES)
    with GoldenFile(golden_dir / "slash.h5") as g:
        assert set(g["slash"].outputs) == set(NAMES)
        assert {k: v.shape for k, v in g["slash"].outputs.items()} == {
            "out/y": (16, 3), "a%2Fb": (16, 3), "a/b": (16, 3), "a": (16, 3), ".dot": (16, 3), "plain": (16, 4)}
    second = golden(update=True, approve="second").check(engine)
    assert isinstance(second, UpdateResult) and set(second.deltas) == set(NAMES)
    assert all(m.samples == 16 and m.elements.l2_delta == 0.0 for m in second.deltas.values())
    shown = _cli("golden", "show", "--json", str(golden_dir / "slash.h5"))
    assert shown.returncode == 0, shown.stderr
    outputs = json.loads(shown.stdout)["snapshots"]["slash"]["current"]["outputs"]
    assert {k: v["shape"] for k, v in outputs.items()} == {
        "out/y": [16, 3], "a%2Fb": [16, 3], "a/b": [16, 3], "a": [16, 3], ".dot": [16, 3], "plain": [16, 4]}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from pytest_trt.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, timeout=timeout)


# -- goldens written by the code before these checks -------------------------------------------------------------

def _today(tmp_path: Path) -> tuple[Path, GoldenCheck, dict[str, np.ndarray]]:
    folder = tmp_path / "golden"
    shutil.copytree(TODAY, folder)
    rng = np.random.default_rng(31)  # make_golden_v2.data(), spelled out: the fixture's outputs
    rng.standard_normal((48, 5))
    labels = rng.integers(0, 4, 48)
    logits = (rng.standard_normal((48, 4)) * 2).astype(np.float32)
    logits[np.arange(48), labels] += 4.0
    probs = rng.random((48, 3)).astype(np.float32)
    config = BuildConfig(name="today", onnx=folder / "today.onnx")
    check = GoldenCheck(GoldenSettings(golden_dir=folder), config_provider=lambda: config)
    return folder, check, {"logits": logits, "head/probs": probs}


def test_golden_written_by_the_earlier_code_reads_checks_and_refreshes(tmp_path: Path) -> None:
    folder, check, outputs = _today(tmp_path)
    path = folder / "today.h5"
    assert not digest_file.sidecar_path(path).exists()
    with GoldenFile(path) as g:
        assert set(g["today"].outputs) == {"logits", "head/probs"} and g["today"].generation == 2
    result = check.check(outputs)
    assert isinstance(result, CheckResult) and result.metrics["head/probs"].elements.l2_delta == 0.0
    config = BuildConfig(name="today", onnx=folder / "today.onnx")
    refresh = GoldenCheck(GoldenSettings(golden_dir=folder, update=True, approve="third"),
                          config_provider=lambda: config).check(outputs)
    assert isinstance(refresh, UpdateResult) and refresh.generation == 3
    assert set(refresh.deltas) == {"logits", "head/probs"} and refresh.deltas["head/probs"].elements.l2_delta == 0.0
    assert digest_file.read_sidecar(path) == (sha256_file(path),)
    assert isinstance(check.check(outputs), CheckResult)


def test_golden_of_the_earlier_code_with_edited_inputs_is_an_edited_golden(tmp_path: Path) -> None:
    folder, check, outputs = _today(tmp_path)
    with h5py.File(folder / "today.h5", "r+") as f:
        x = f["dataset/inputs/x"]
        x[0] = x[0] + 1.0
    with pytest.raises(GoldenCorrupt, match=r"was edited after its approval: the stored golden dataset does not "
                                            r"match its sha256") as info:
        check.check(outputs)
    assert "[REGRESSION]" not in str(info.value)


# -- hand edits --------------------------------------------------------------------------------------------------

@pytest.fixture
def approved(golden: MakeGolden, make_config: Callable[..., BuildConfig], dataset: GoldenDataset,
             golden_dir: Path) -> OrtEngine:
    engine = OrtEngine(make_config())
    assert isinstance(golden(update=True, approve="first").check(engine, dataset=dataset), UpdateResult)
    return engine


def _forge(path: Path, edit: str) -> None:
    """Edit the golden in place with h5py, keeping every sha256 attribute as it was."""
    with h5py.File(path, "r+") as f:
        x = f["dataset/inputs/x"]
        logits = f["snapshots/tiny/outputs/logits"]
        if edit == "forged":  # other inputs and outputs that match each other
            x[...] = x[()] * 0.5
            logits[...] = logits[()] * 0.5
        elif edit == "inputs-swapped":
            x[...] = x[()][::-1]
        elif edit == "outputs-swapped":
            logits[...] = logits[()][::-1]
        elif edit == "approvals-deleted":
            del f["approvals"]
        elif edit == "labels":
            labels = f["dataset/labels"]
            labels[0] = (labels[0] + 1) % 5
        elif edit == "tags":
            tags = f["dataset/tags"]
            tags[1] = "edge"


EDITS = {"forged": "input 'x'", "inputs-swapped": "input 'x'", "outputs-swapped": "output 'logits'",
         "approvals-deleted": "snapshot 'tiny' generation 1 has no approval record", "labels": "labels",
         "tags": "tags"}


@pytest.mark.parametrize("sidecar", ["resealed", "removed"])
@pytest.mark.parametrize("edit", list(EDITS))
def test_hand_edits_are_an_edited_golden_never_a_regression(golden: MakeGolden, golden_dir: Path,
                                                            approved: OrtEngine, dataset: GoldenDataset,
                                                            edit: str, sidecar: str) -> None:
    path = golden_dir / "tiny.h5"
    _forge(path, edit)
    if sidecar == "resealed":  # the editor also rewrote the digest file
        reseal(path)
    else:  # or dropped it: the file reads like one written before the digest file existed
        digest_file.sidecar_path(path).unlink()
    with pytest.raises(GoldenCorrupt) as info:
        golden().check(approved, dataset=dataset)
    message = str(info.value)
    assert f"golden file {path} was edited after its approval: " in message and EDITS[edit] in message
    assert "[REGRESSION]" not in message and "git checkout --" in message


def test_hand_edit_without_resealing_fails_before_h5py_opens_the_file(golden: MakeGolden, golden_dir: Path,
                                                                      approved: OrtEngine) -> None:
    path = golden_dir / "tiny.h5"
    _forge(path, "outputs-swapped")
    found = sha256_file(path)
    with pytest.raises(GoldenCorrupt) as info:
        golden().check(approved)
    message = str(info.value)
    assert message.startswith(f"golden file {path} does not match its approved digest (tiny.h5.sha256: ")
    assert f"found {found}" in message and "git checkout --" in message


def test_untouched_golden_passes_and_its_digest_is_sha256sum_checkable(golden: MakeGolden, golden_dir: Path,
                                                                       approved: OrtEngine) -> None:
    assert isinstance(golden().check(approved), CheckResult)
    done = subprocess.run(["sha256sum", "-c", "tiny.h5.sha256"], cwd=golden_dir, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "tiny.h5: OK"
    (line,) = [json.loads(t) for t in (golden_dir / "APPROVALS.jsonl").read_text().splitlines()]
    assert line["file_sha256"] == sha256_file(golden_dir / "tiny.h5") and line["generation"] == 1


# -- damaged bytes -----------------------------------------------------------------------------------------------

def _damage(raw: bytes, mode: str, offset: int) -> bytes:
    if mode == "inserted":
        return raw[:offset] + b"\x5a" * 12 + raw[offset:]
    if mode == "removed":
        return raw[:offset] + raw[offset + 12:]
    flipped = bytearray(raw)
    flipped[offset] ^= 0x01
    return bytes(flipped)


@pytest.mark.parametrize("mode", ["inserted", "removed", "flipped"])
def test_damaged_golden_fails_within_seconds_in_check_update_and_show(
        golden: MakeGolden, golden_dir: Path, approved: OrtEngine, mode: str) -> None:
    path = golden_dir / "tiny.h5"
    raw = path.read_bytes()
    for offset in (0, 47, len(raw) // 3, len(raw) // 2, len(raw) - 13):
        damaged = _damage(raw, mode, offset)
        path.write_bytes(damaged)
        for action in ("check", "update"):
            start = time.monotonic()
            with pytest.raises(GoldenCorrupt, match=r"does not match its approved digest"):
                golden(update=action == "update", approve="refresh").check(approved)
            assert time.monotonic() - start < 10
            assert path.read_bytes() == damaged  # the update left it as it was
    start = time.monotonic()
    shown = _cli("golden", "show", str(path), timeout=30)
    assert time.monotonic() - start < 30
    assert shown.returncode == 3 and "does not match its approved digest" in shown.stderr
    assert "Traceback" not in shown.stderr


def test_golden_without_digest_is_read_in_a_child_process_with_a_time_limit(
        golden: MakeGolden, golden_dir: Path, approved: OrtEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    path = golden_dir / "tiny.h5"
    digest_file.sidecar_path(path).unlink()
    assert isinstance(golden().check(approved), CheckResult)  # an intact file answers
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2] + b"\x5a" * 12 + raw[len(raw) // 2:])
    with pytest.raises(GoldenCorrupt, match=r"cannot be read \(.*\); it is corrupt or truncated"):
        golden().check(approved)
    monkeypatch.setattr(probe, "PROBE_TIMEOUT_S", 0.0)
    monkeypatch.setattr(probe, "PROBE_RATE", 1 << 60)  # a limit no child process meets: as a hang looks
    path.write_bytes(raw + b"")
    os.utime(path, ns=(1, 1))
    with pytest.raises(GoldenCorrupt, match=r"did not finish reading it within .* s in a child process"):
        golden().check(approved)


def test_golden_that_is_a_fifo_fails_instead_of_blocking(golden: MakeGolden, golden_dir: Path,
                                                         approved: OrtEngine) -> None:
    path = golden_dir / "tiny.h5"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(GoldenCorrupt, match="is not a regular file"):
        golden().check(approved)


# -- the approval log --------------------------------------------------------------------------------------------

def test_torn_last_line_is_closed_and_the_next_approval_kept(golden: MakeGolden, golden_dir: Path,
                                                             approved: OrtEngine) -> None:
    log = golden_dir / "APPROVALS.jsonl"
    log.write_bytes(log.read_bytes()[:-30])  # the last 30 bytes and the line end lost
    with pytest.warns(ApprovalLogWarning, match=r"APPROVALS.jsonl:1: the last line was torn"):
        golden(update=True, approve="second,CR-2").check(approved)
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    last = json.loads(lines[1])
    assert (last["generation"], last["reason"]) == (2, "second,CR-2")


def test_garbage_line_is_warned_about_and_the_rest_read(golden: MakeGolden, golden_dir: Path,
                                                        approved: OrtEngine) -> None:
    log = golden_dir / "APPROVALS.jsonl"
    log.write_bytes(b"<<<<<<< HEAD merge garbage\n" + log.read_bytes())
    with pytest.warns(ApprovalLogWarning, match=r"APPROVALS.jsonl:1: not an approval record"):
        golden(update=True, approve="second,CR-2").check(approved)
    with pytest.warns(ApprovalLogWarning, match=r"APPROVALS.jsonl:1: not an approval record"):
        records = read_jsonl(golden_dir)
    assert [(r["generation"], r["reason"]) for r in records] == [(1, "first"), (2, "second,CR-2")]


def test_approval_log_that_is_a_folder_fails_before_anything_moves(golden: MakeGolden, golden_dir: Path,
                                                                   approved: OrtEngine) -> None:
    path = golden_dir / "tiny.h5"
    before = (path.read_bytes(), digest_file.sidecar_path(path).read_bytes())
    log = golden_dir / "APPROVALS.jsonl"
    log.unlink()
    log.mkdir()
    with pytest.raises(FolderUnusable, match=r"approval log .*APPROVALS.jsonl is not a file"):
        golden(update=True, approve="second").check(approved)
    assert (path.read_bytes(), digest_file.sidecar_path(path).read_bytes()) == before
    with GoldenFile(path) as g:
        assert g["tiny"].generation == 1 and len(g.approvals()) == 1
    assert not list(golden_dir.glob(".tiny.h5.tmp-*"))


def test_approval_log_failing_after_the_file_is_complete_leaves_golden_and_sidecar(
        golden: MakeGolden, golden_dir: Path, approved: OrtEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Log first: when the line cannot be written, the new file does not replace the old one."""
    path = golden_dir / "tiny.h5"
    before = (path.read_bytes(), digest_file.sidecar_path(path).read_bytes(),
              (golden_dir / "APPROVALS.jsonl").read_bytes())
    from pytest_trt.golden.approvals import HeldLog

    def refuse(log: HeldLog, record: object, signer: object = None) -> bytes:
        raise FolderUnusable(f"approval log {log.path} cannot be written (disk full)", path=log.path)

    monkeypatch.setattr(HeldLog, "append", refuse)
    with pytest.raises(FolderUnusable, match="disk full"):
        golden(update=True, approve="second").check(approved)
    assert (path.read_bytes(), digest_file.sidecar_path(path).read_bytes(),
            (golden_dir / "APPROVALS.jsonl").read_bytes()) == before
    monkeypatch.undo()
    assert isinstance(golden().check(approved), CheckResult)


# -- fuzz: any damaged range is caught before h5py ---------------------------------------------------------------

_GOLDEN_BYTES: dict[str, bytes] = {}


def _plugin_golden(folder: Path) -> Path:
    """A golden written by an approved update (made once, copied per example)."""
    if "raw" not in _GOLDEN_BYTES:
        from golden_engines import write_model

        made = folder / "made"
        made.mkdir()
        config = BuildConfig(name="fz", onnx=write_model(made / "fz.onnx"),
                             profiles=(Profile(x=((1, 8), (16, 8), (16, 8))),))
        x = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32)
        GoldenCheck(GoldenSettings(golden_dir=made, update=True, approve="fuzz")).check(
            OrtEngine(config), dataset=GoldenDataset.from_arrays({"x": x}))
        _GOLDEN_BYTES["raw"] = (made / "fz.h5").read_bytes()
        _GOLDEN_BYTES["sidecar"] = (made / "fz.h5.sha256").read_bytes()
    path = folder / "fz.h5"
    path.write_bytes(_GOLDEN_BYTES["raw"])
    digest_file.sidecar_path(path).write_bytes(_GOLDEN_BYTES["sidecar"])
    return path


@fuzz_settings
@given(mode=st.sampled_from(["inserted", "removed", "flipped"]), where=st.floats(0.0, 1.0, exclude_max=True),
       size=st.integers(1, 64), byte=st.integers(1, 255))
def test_fuzz_any_damaged_range_is_caught_before_h5py(tmp_path_factory: pytest.TempPathFactory, mode: str,
                                                      where: float, size: int, byte: int) -> None:
    path = _plugin_golden(tmp_path_factory.mktemp("fz"))
    raw = _GOLDEN_BYTES["raw"]
    offset = int(where * len(raw))
    if mode == "inserted":
        damaged = raw[:offset] + bytes([byte]) * size + raw[offset:]
    elif mode == "removed":
        damaged = raw[:offset] + raw[offset + size:]
    else:
        flipped = bytearray(raw)
        for i in range(offset, min(offset + size, len(raw))):
            flipped[i] ^= byte
        damaged = bytes(flipped)
    path.write_bytes(damaged)
    with pytest.raises(GoldenCorrupt, match="does not match its approved digest"):
        with GoldenFile(path):
            pass
