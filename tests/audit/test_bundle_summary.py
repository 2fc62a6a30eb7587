"""The "pytest-trt audit bundles" summary lines: one per bundle, with the bytes on disk when processes disagree."""

from __future__ import annotations

import hashlib
import os

from pytest_trt.pytest_plugin.audit import bundle_summary


def _row(path, sha, size=10, config="c" * 64):
    return {"path": str(path), "sha256": sha, "size": size, "config_hash": config}


def test_one_line_per_bundle_from_the_rows_when_they_agree(tmp_path):
    path = tmp_path / "gone.tar.gz"  # never read: the rows agree
    lines = bundle_summary([_row(path, "a" * 64, 1234), _row(path, "a" * 64, 1234)], [])
    assert lines == [f"{path}  sha256 {'a' * 16}  1,234 bytes"]


def test_rows_that_disagree_take_the_file_on_disk(tmp_path):
    # two xdist workers rewrote one bundle (the second with a golden verdict); their rows reach the controller
    # in worker order, not in the order of the writes: the file decides
    path = tmp_path / "m-v1-rtx1.7-cpu-aot.tar.gz"
    path.write_bytes(b"the bundle the last writer left" * 100)
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    for rows in ([_row(path, "a" * 64), _row(path, "b" * 64)], [_row(path, "b" * 64), _row(path, "a" * 64)]):
        assert bundle_summary(rows, []) == [f"{path}  sha256 {want[:16]}  3,100 bytes"]


def test_rows_that_disagree_about_a_vanished_file_keep_the_last_row(tmp_path):
    path = tmp_path / "removed.tar.gz"
    assert bundle_summary([_row(path, "a" * 64), _row(path, "b" * 64, 7)], []) == [f"{path}  sha256 {'b' * 16}  7 bytes"]


def test_two_configs_for_one_bundle_name_are_a_warning(tmp_path):
    path = tmp_path / "m.tar.gz"
    lines = bundle_summary([_row(path, "a" * 64, config="1" * 64), _row(path, "a" * 64, config="2" * 64)], [])
    assert lines[-1] == "WARNING m.tar.gz: written for 2 configs with the same name, version, backend and device"


def test_a_bundle_replaced_while_it_is_hashed_gives_one_files_digest_and_size(tmp_path, monkeypatch):
    # another process renames its bundle over this path while the summary reads it: the line names one file
    from pytest_trt.common import filehash

    path = tmp_path / "m-v1-rtx1.7-cpu-aot.tar.gz"
    old = b"the bundle that was read" * 100
    path.write_bytes(old)
    newer = tmp_path / "newer.tmp"
    newer.write_bytes(b"a longer bundle renamed over it while it was hashed" * 100)
    real = filehash._sha256_of

    def replaced_meanwhile(fh):
        digest = real(fh)
        os.replace(newer, path)
        return digest

    monkeypatch.setattr(filehash, "_sha256_of", replaced_meanwhile)
    lines = bundle_summary([_row(path, "a" * 64), _row(path, "b" * 64)], [])
    assert lines == [f"{path}  sha256 {hashlib.sha256(old).hexdigest()[:16]}  {len(old):,} bytes"]
