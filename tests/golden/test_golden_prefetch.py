"""A golden's digest started early on another core (``integrity.prefetch``), and its blocks checked against the
digests its approval logged (``blocks.BlockVerifier``): used only for the file as it was hashed; a file changed
after (or while) it was hashed is hashed again and fails; h5py's reader gets checked blocks only; a prefetch or a
block thread that cannot start leaves the check to hash in line."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.common import filehash
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden import blocks, digest_file, integrity
from pytest_trt.golden.workflow import GoldenSettings, prefetch


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    filehash._SHA256_MEMO.clear()
    filehash._PENDING.clear()
    yield
    filehash._SHA256_MEMO.clear()
    filehash._PENDING.clear()
    for verifier in integrity._VERIFIERS.values():
        verifier.close()
    integrity._VERIFIERS.clear()


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A file with its approved digest file (what ``check_file`` needs; h5py never sees it here)."""
    path = tmp_path / "model.h5"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB: several blocks
    digest_file.write_sidecar(path, [hashlib.sha256(path.read_bytes()).hexdigest()])
    return path


def _wait(path: Path) -> None:
    assert filehash._PENDING, f"no hash of {path} was started"
    for future in list(filehash._PENDING.values()):
        future.result()


def _flip(path: Path, offset: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_prefetched_digest_is_what_the_check_uses(golden: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert integrity.prefetch(golden)
    _wait(golden)

    def no_inline_hash() -> Any:
        raise AssertionError("hashed in line although the prefetched digest was ready")

    monkeypatch.setattr(filehash.hashlib, "sha256", no_inline_hash)
    assert integrity.check_file(golden) == digest_file.read_sidecar(golden)[0]  # type: ignore[index]
    assert not filehash._PENDING


def test_file_changed_after_the_early_hash_is_hashed_again_and_fails(golden: Path) -> None:
    assert integrity.prefetch(golden)
    _wait(golden)
    _flip(golden, 5000)  # same size
    with pytest.raises(GoldenCorrupt, match=f"golden file {golden} does not match its approved digest"):
        integrity.check_file(golden)


def test_file_changed_while_it_is_hashed_is_hashed_again_and_fails(golden: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    real = hashlib.sha256
    changed: list[bool] = []

    class Changing:
        def __init__(self) -> None:
            self._h = real()

        def update(self, block: bytes) -> None:
            if not changed:
                changed.append(True)
                _flip(golden, 700_000)
            self._h.update(block)

        def hexdigest(self) -> str:
            return self._h.hexdigest()

    monkeypatch.setattr(filehash.hashlib, "sha256", Changing)
    assert integrity.prefetch(golden)
    _wait(golden)
    monkeypatch.setattr(filehash.hashlib, "sha256", real)
    with pytest.raises(GoldenCorrupt, match="does not match its approved digest"):
        integrity.check_file(golden)


def test_prefetch_that_cannot_start_leaves_the_check_to_hash_in_line(golden: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(filehash, "on_thread", refuse)
    assert not integrity.prefetch(golden)
    assert not filehash._PENDING
    assert integrity.check_file(golden) == digest_file.read_sidecar(golden)[0]  # type: ignore[index]
    _flip(golden, 10)
    with pytest.raises(GoldenCorrupt, match="does not match"):
        integrity.check_file(golden)


def test_prefetch_whose_hash_failed_leaves_the_check_to_hash_in_line(golden: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(path: Any, key: Any) -> Any:
        raise OSError("disk went away")

    monkeypatch.setattr(filehash, "_hash_stable", fail)
    assert integrity.prefetch(golden)
    for future in list(filehash._PENDING.values()):
        with pytest.raises(OSError):
            future.result()
    monkeypatch.undo()
    assert integrity.check_file(golden) == digest_file.read_sidecar(golden)[0]  # type: ignore[index]


def test_nothing_is_prefetched_without_a_digest_file_or_a_golden(tmp_path: Path, golden: Path) -> None:
    bare = tmp_path / "old.h5"
    bare.write_bytes(b"\x89HDF")
    assert not integrity.prefetch(bare)  # the child-process probe reads it, in line
    assert not integrity.prefetch(tmp_path / "missing.h5")
    settings = GoldenSettings(golden_dir=tmp_path)
    prefetch(settings, None)
    prefetch(settings, "missing")
    assert not filehash._PENDING
    prefetch(settings, "model")
    assert len(filehash._PENDING) == 1
    prefetch(settings, "model")  # once per file identity
    assert len(filehash._PENDING) == 1


# -- blocks checked against the digests the approval logged ---------------------------------------------------

BLOCK = 4096


@pytest.fixture
def blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 10-block file with its digest file and an APPROVALS.jsonl line logging its blocks."""
    monkeypatch.setattr(blocks, "BLOCK_BYTES", BLOCK)
    path = tmp_path / "model.h5"
    path.write_bytes(bytes(range(256)) * (10 * BLOCK // 256 - 1) + b"tail")
    whole, logged = blocks.file_digests(path)
    assert len(logged["sha256"]) == 10 and logged["size"] == path.stat().st_size
    digest_file.write_sidecar(path, [whole])
    (tmp_path / "APPROVALS.jsonl").write_text(json.dumps(
        {"file": path.name, "config": "model", "generation": 1, "file_sha256": whole,
         blocks.BLOCKS_FIELD: logged}) + "\n")
    return path


def _opened(path: Path) -> blocks.BlockVerifier:
    whole, verifier = integrity.open_checked(path)
    assert verifier is not None and whole == digest_file.read_sidecar(path)[0]  # type: ignore[index]
    return verifier


def test_reader_gives_checked_blocks_only_and_a_damaged_block_fails(blocked: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _flip(blocked, 3 * BLOCK + 7)
    monkeypatch.setattr(blocks.BlockVerifier, "start", lambda self: True)  # blocks checked as they are read
    verifier = _opened(blocked)
    try:
        reader = verifier.reader()
        assert reader.read(3 * BLOCK) == blocked.read_bytes()[: 3 * BLOCK]
        with pytest.raises(GoldenCorrupt, match=f"golden file {blocked} does not match its approved digest.*"
                                                f"for bytes {3 * BLOCK}-{4 * BLOCK}"):
            reader.read(BLOCK)
        with pytest.raises(GoldenCorrupt, match="does not match"):
            reader.read(10)  # any read after a mismatch
        with pytest.raises(GoldenCorrupt, match="does not match"):
            verifier.finish()
    finally:
        verifier.close()
    assert known_whole(blocked) is None


def known_whole(path: Path) -> str | None:
    return filehash.known_sha256(filehash.file_identity(path, path.stat()))


def test_damaged_block_no_read_touches_fails_at_the_end(blocked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _flip(blocked, 9 * BLOCK + 1)
    monkeypatch.setattr(blocks.BlockVerifier, "start", lambda self: True)
    verifier = _opened(blocked)
    try:
        assert verifier.reader().read(BLOCK) == blocked.read_bytes()[:BLOCK]
        with pytest.raises(GoldenCorrupt, match=f"for bytes {9 * BLOCK}-"):
            verifier.finish()
    finally:
        verifier.close()


def test_clean_file_checked_on_another_core_is_remembered_whole(blocked: Path) -> None:
    assert integrity.prefetch(blocked)
    verifier = _opened(blocked)  # the one started early
    try:
        assert verifier.reader().read() == blocked.read_bytes()
        verifier.finish()
    finally:
        verifier.close()
    assert known_whole(blocked) == digest_file.read_sidecar(blocked)[0]  # type: ignore[index]
    assert not integrity._VERIFIERS


def test_file_changed_after_its_blocks_were_checked_early_is_checked_again(blocked: Path) -> None:
    assert integrity.prefetch(blocked)
    early = integrity._VERIFIERS[filehash.file_identity(blocked, blocked.stat())]
    early.finish()  # every block checked, the file's digest remembered for its identity then
    _flip(blocked, 5 * BLOCK)
    verifier = _opened(blocked)
    try:
        assert verifier is not early
        with pytest.raises(GoldenCorrupt, match="does not match"):
            verifier.reader().read()
    finally:
        verifier.close()
        early.close()


def test_block_thread_that_cannot_start_leaves_the_reader_to_check(blocked: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(blocks, "on_thread", refuse)
    verifier = _opened(blocked)
    try:
        assert verifier.reader().read() == blocked.read_bytes()
        verifier.finish()
    finally:
        verifier.close()


def test_golden_whose_size_or_log_line_differs_is_hashed_whole(blocked: Path) -> None:
    log = blocked.parent / "APPROVALS.jsonl"
    log.write_text(log.read_text().replace('"model.h5"', '"other.h5"'))
    assert integrity.open_checked(blocked) == (digest_file.read_sidecar(blocked)[0], None)  # type: ignore[index]
    filehash._SHA256_MEMO.clear()
    with blocked.open("ab") as fh:
        fh.write(b"x")
    with pytest.raises(GoldenCorrupt, match="does not match its approved digest"):
        integrity.open_checked(blocked)


@pytest.mark.parametrize("early", [True, False], ids=["on-another-core", "as-read"])
def test_block_read_in_pieces_is_hashed_whole_and_damage_in_its_last_piece_fails(
        blocked: Path, monkeypatch: pytest.MonkeyPatch, early: bool) -> None:
    monkeypatch.setattr(blocks, "READ_BYTES", 1000)  # each 4096-byte block read in 5 pieces into one buffer
    clean = blocked.read_bytes()
    _flip(blocked, 6 * BLOCK + 4090)
    if early:
        assert integrity.prefetch(blocked)
    else:
        monkeypatch.setattr(blocks.BlockVerifier, "start", lambda self: True)
    verifier = _opened(blocked)
    try:
        if not early:  # (the thread may have reached block 6 before a read: then every read fails)
            assert verifier.reader().read(6 * BLOCK) == clean[: 6 * BLOCK]  # blocks 0-5 match their sha256
        with pytest.raises(GoldenCorrupt, match=f"for bytes {6 * BLOCK}-{7 * BLOCK}"):
            verifier.finish()
    finally:
        verifier.close()


def test_block_of_a_file_cut_short_after_it_was_opened_fails(blocked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blocks, "READ_BYTES", 1000)
    monkeypatch.setattr(blocks.BlockVerifier, "start", lambda self: True)
    verifier = _opened(blocked)
    try:
        os.truncate(blocked, 8 * BLOCK + 2500)  # block 8 ends inside its third piece, block 9 is gone
        assert verifier.reader().read(8 * BLOCK) == blocked.read_bytes()[: 8 * BLOCK]
        with pytest.raises(GoldenCorrupt, match=f"for bytes {8 * BLOCK}-"):
            verifier.finish()
    finally:
        verifier.close()
