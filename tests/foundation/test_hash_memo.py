"""The ONNX file hash is memoised by path, size, mtime, ctime and inode: edits are always seen."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pytest_trt.common import filehash
from pytest_trt.common.filehash import sha256_file


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

    monkeypatch.setattr(filehash.hashlib, "sha256", counting)
    assert sha256_file(path, memo=True) == first and calls == []  # memoised: not read again
    st = os.stat(path)
    path.write_bytes(b"B" * 4096)  # same size ...
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and mtime put back: ctime still moved
    assert sha256_file(path, memo=True) == real(b"B" * 4096).hexdigest() and calls == [1]
    other = tmp_path / "copy.onnx"
    other.write_bytes(b"B" * 4096)
    assert sha256_file(other, memo=True) == sha256_file(path, memo=True)


# -- stamps: the digest kept across processes (a session, an xdist worker) by the file's identity ---------------

_READER = """
import sys
from pathlib import Path
from pytest_trt.common import filehash, fileio
filehash.set_stamp_folder(Path(sys.argv[1]))
read = []
real = filehash._sha256_of
def counting(fh):
    read.append(1)
    return real(fh)
filehash._sha256_of = counting
print(filehash.sha256_file(sys.argv[2], memo=True, stamped=True), len(read))
"""


def _other_process(stamps: Path, model: Path) -> tuple[str, int]:
    """The digest another process gets for ``model``, and how many times it read the file to get it."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _READER, str(stamps), str(model)], check=True, capture_output=True,
                         text=True).stdout.split()
    return out[0], int(out[1])


def _settled(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Stamp files written just now (the default waits a second after a file's last change)."""
    monkeypatch.setattr(filehash, "STAMP_SETTLE_NS", -(10**12))


def test_a_second_process_reads_the_stamp_and_hashes_again_after_each_kind_of_change(tmp_path: Path,
                                                                                     monkeypatch) -> None:  # type: ignore[no-untyped-def]
    stamps, model = tmp_path / "identity", tmp_path / "model.onnx"
    model.write_bytes(b"A" * 4096)
    monkeypatch.setattr(filehash, "_STAMP_FOLDER", [stamps])
    _settled(monkeypatch)
    assert sha256_file(model, memo=True, stamped=True) == hashlib.sha256(b"A" * 4096).hexdigest()
    assert len(list(stamps.iterdir())) == 1
    assert _other_process(stamps, model) == (hashlib.sha256(b"A" * 4096).hexdigest(), 0)  # the stamp, no read

    # same size, mtime put back: only ctime tells (os.utime cannot set it back)
    st = os.stat(model)
    with open(model, "r+b") as fh:
        fh.write(b"B")
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = hashlib.sha256(b"B" + b"A" * 4095).hexdigest()
    assert os.stat(model).st_size == st.st_size and os.stat(model).st_mtime_ns == st.st_mtime_ns
    assert _other_process(stamps, model) == (edited, 1)

    # another file renamed into the path, with the old size and mtime: a new inode
    sha256_file(model, memo=True, stamped=True)
    assert _other_process(stamps, model) == (edited, 0)
    st = os.stat(model)
    replacement = tmp_path / "new.onnx"
    replacement.write_bytes(b"C" * 4096)
    os.replace(replacement, model)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _other_process(stamps, model) == (hashlib.sha256(b"C" * 4096).hexdigest(), 1)

    # size
    sha256_file(model, memo=True, stamped=True)
    with open(model, "ab") as fh:
        fh.write(b"D")
    assert _other_process(stamps, model) == (hashlib.sha256(b"C" * 4096 + b"D").hexdigest(), 1)


def test_each_identity_field_invalidates_a_stamp(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(filehash, "_STAMP_FOLDER", [tmp_path / "identity"])
    key = (str(tmp_path / "m.onnx"), 10, 2 * 10**18, 2 * 10**18, 77)
    assert filehash.write_stamp(key, "ab" * 32, hashed_at=3 * 10**18)
    assert filehash.read_stamp(key) == "ab" * 32
    for i in range(1, 5):  # size, mtime_ns, ctime_ns, inode
        changed = list(key)
        changed[i] += 1
        assert filehash.read_stamp(tuple(changed)) is None, i  # type: ignore[arg-type]


def test_a_file_changed_within_the_last_second_gets_no_stamp(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """File times tick coarsely: a same-size rewrite within one tick keeps the identity, so a file that changed
    just before it was hashed is not stamped (it is still memoised in this process)."""
    stamps, model = tmp_path / "identity", tmp_path / "model.onnx"
    monkeypatch.setattr(filehash, "_STAMP_FOLDER", [stamps])
    model.write_bytes(b"A" * 4096)
    sha256_file(model, memo=True, stamped=True)
    assert not stamps.exists() or not list(stamps.iterdir())
    assert _other_process(stamps, model)[1] == 1
