"""The ONNX file hash is memoised by path, size, mtime, ctime and inode: edits are always seen."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pytest_trt.common import fileio
from pytest_trt.common.fileio import sha256_file


def test_memo_returns_the_hash_and_sees_every_edit(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "model.onnx"
    path.write_bytes(b"A" * 4096)
    first = sha256_file(path, memo=True)
    assert first == hashlib.sha256(b"A" * 4096).hexdigest()
    calls: list[int] = []
    real = hashlib.sha256

    def counting(*args: bytes) -> object:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(fileio.hashlib, "sha256", counting)
    assert sha256_file(path, memo=True) == first and calls == []  # memoised: not read again
    st = os.stat(path)
    path.write_bytes(b"B" * 4096)  # same size ...
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and mtime put back: ctime still moved
    assert sha256_file(path, memo=True) == real(b"B" * 4096).hexdigest() and calls == [1]
    other = tmp_path / "copy.onnx"
    other.write_bytes(b"B" * 4096)
    assert sha256_file(other, memo=True) == sha256_file(path, memo=True)
