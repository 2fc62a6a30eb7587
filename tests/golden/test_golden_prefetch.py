"""The golden's file digest started early on another core (``integrity.prefetch``): used only for the file as it
was hashed; a file changed after (or while) it was hashed is hashed again and fails; a prefetch that cannot start
or fails leaves the check to hash in line."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.common import fileio
from pytest_trt.errors import GoldenCorrupt
from pytest_trt.golden import integrity
from pytest_trt.golden.workflow import GoldenSettings, prefetch


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    fileio._SHA256_MEMO.clear()
    fileio._PENDING.clear()
    yield
    fileio._SHA256_MEMO.clear()
    fileio._PENDING.clear()


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A file with its approved digest file (what ``check_file`` needs; h5py never sees it here)."""
    path = tmp_path / "model.h5"
    path.write_bytes(bytes(range(256)) * 4096)  # 1 MiB: several blocks
    integrity.write_sidecar(path, [hashlib.sha256(path.read_bytes()).hexdigest()])
    return path


def _wait(path: Path) -> None:
    assert fileio._PENDING, f"no hash of {path} was started"
    for future in list(fileio._PENDING.values()):
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

    monkeypatch.setattr(fileio.hashlib, "sha256", no_inline_hash)
    assert integrity.check_file(golden) == integrity.read_sidecar(golden)[0]  # type: ignore[index]
    assert not fileio._PENDING


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

    monkeypatch.setattr(fileio.hashlib, "sha256", Changing)
    assert integrity.prefetch(golden)
    _wait(golden)
    monkeypatch.setattr(fileio.hashlib, "sha256", real)
    with pytest.raises(GoldenCorrupt, match="does not match its approved digest"):
        integrity.check_file(golden)


def test_prefetch_that_cannot_start_leaves_the_check_to_hash_in_line(golden: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(fileio, "on_thread", refuse)
    assert not integrity.prefetch(golden)
    assert not fileio._PENDING
    assert integrity.check_file(golden) == integrity.read_sidecar(golden)[0]  # type: ignore[index]
    _flip(golden, 10)
    with pytest.raises(GoldenCorrupt, match="does not match"):
        integrity.check_file(golden)


def test_prefetch_whose_hash_failed_leaves_the_check_to_hash_in_line(golden: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(path: Any, key: Any) -> Any:
        raise OSError("disk went away")

    monkeypatch.setattr(fileio, "_hash_stable", fail)
    assert integrity.prefetch(golden)
    for future in list(fileio._PENDING.values()):
        with pytest.raises(OSError):
            future.result()
    monkeypatch.undo()
    assert integrity.check_file(golden) == integrity.read_sidecar(golden)[0]  # type: ignore[index]


def test_nothing_is_prefetched_without_a_digest_file_or_a_golden(tmp_path: Path, golden: Path) -> None:
    bare = tmp_path / "old.h5"
    bare.write_bytes(b"\x89HDF")
    assert not integrity.prefetch(bare)  # the child-process probe reads it, in line
    assert not integrity.prefetch(tmp_path / "missing.h5")
    settings = GoldenSettings(golden_dir=tmp_path)
    prefetch(settings, None)
    prefetch(settings, "missing")
    assert not fileio._PENDING
    prefetch(settings, "model")
    assert len(fileio._PENDING) == 1
    prefetch(settings, "model")  # once per file identity
    assert len(fileio._PENDING) == 1
