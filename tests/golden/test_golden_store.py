"""The HDF5 store on real files: layout, determinism, corrupt and truncated files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np
import pytest

from pytest_trt.errors import GoldenCorrupt, GoldenError
from pytest_trt.golden import atomic, store, writers
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.provenance import Provenance
from pytest_trt.golden.show import golden_show, golden_show_json
from pytest_trt.golden.updating import create_golden

PROV = Provenance(backend="onnxruntime", backend_version="1.32.0", device='{"kind":"cpu"}', config_hash="c" * 64,
                  onnx_sha256="o" * 64, dataset_sha256="d" * 64, plugin_version="0.1.0",
                  created="2025-01-01T00:00:00Z", git_commit=None)


def write_snapshot(path: Path, dataset: GoldenDataset, logits: np.ndarray, generation_note: str = "x") -> None:
    with atomic.update(path) as f:
        if "dataset" not in f:
            writers.write_dataset(f, dataset)
        group, gen = writers.begin_snapshot(f, "tiny")
        ds = writers.create_output(group, "logits", logits.shape[0], logits.shape[1:], logits.dtype)
        ds[...] = logits
        writers.finish_snapshot(group, generation=gen, provenance=PROV, baselines={"logits": {"accuracy": 0.5}},
                              record_json='{"layers":[]}')
        writers.append_approval(f, {"reason": generation_note, "generation": gen})


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_roundtrip_layout_and_history(tmp_path: Path, dataset: GoldenDataset) -> None:
    path = tmp_path / "tiny.h5"
    logits = np.arange(500, dtype=np.float32).reshape(100, 5)
    write_snapshot(path, dataset, logits, "first")
    write_snapshot(path, dataset, logits + 1, "second")
    with store.GoldenFile(path) as g:
        assert g.samples == 100 and g.dataset_sha256 == dataset.digest()
        assert list(g) == ["tiny"] and "tiny" in g and "other" not in g
        snap = g["tiny"]
        assert snap.generation == 2 and snap.provenance == PROV
        np.testing.assert_array_equal(snap.outputs["logits"][()], logits + 1)
        assert [h.generation for h in g.history("tiny")] == [1]
        np.testing.assert_array_equal(g.history("tiny")[0].outputs["logits"][()], logits)
        assert [a["reason"] for a in g.approvals()] == ["first", "second"]
        back = g.load_dataset()
        assert back.tags == dataset.tags and np.array_equal(back.labels, dataset.labels)
        # unfiltered (measured: benchmarks/bench_codecs.py), so stored contiguous (no chunks);
        # the small labels keep gzip, hence chunks of whole samples
        assert snap.outputs["logits"].chunks is None and snap.outputs["logits"].compression is None
        assert g.inputs()["x"].chunks is None and g.inputs()["x"].compression is None and not g.inputs()["x"].shuffle
        assert g.h5["dataset/labels"].compression == "gzip" and g.h5["dataset/labels"].chunks == (100,)


def test_identical_content_gives_identical_bytes(tmp_path: Path, dataset: GoldenDataset) -> None:
    logits = np.linspace(0, 1, 500, dtype=np.float32).reshape(100, 5)
    a, b = tmp_path / "a" / "tiny.h5", tmp_path / "b" / "tiny.h5"
    write_snapshot(a, dataset, logits)
    write_snapshot(b, dataset, logits)
    assert sha(a) == sha(b)
    write_snapshot(a, dataset, logits)
    write_snapshot(b, dataset, logits)
    assert sha(a) == sha(b)


@pytest.mark.parametrize("damage", ["truncate", "garbage-header", "not-hdf5", "foreign-hdf5"])
def test_corrupt_file_raises_and_is_left_untouched(tmp_path: Path, dataset: GoldenDataset, damage: str) -> None:
    path = tmp_path / "tiny.h5"
    write_snapshot(path, dataset, np.ones((100, 5), np.float32))
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage-header":
        path.write_bytes(b"\0" * 64 + raw[64:])
    elif damage == "not-hdf5":
        path.write_text("version https://git-lfs.github.com/spec/v1\n")
    else:  # another program's HDF5 file, without a digest file: the layout check refuses it
        path.unlink()
        path.with_name(path.name + ".sha256").unlink()
        with h5py.File(path, "w") as f:
            f["x"] = 1
    before = sha(path)
    with pytest.raises(GoldenCorrupt) as info:
        with store.GoldenFile(path):
            pass
    message = str(info.value)
    assert str(path) in message and "left untouched" in message and "git checkout --" in message
    with pytest.raises(GoldenCorrupt):
        write_snapshot(path, dataset, np.zeros((100, 5), np.float32))
    assert sha(path) == before
    assert not list(tmp_path.glob(".tiny.h5.tmp-*"))


def test_failed_update_leaves_file_and_no_temp(tmp_path: Path, dataset: GoldenDataset) -> None:
    path = tmp_path / "tiny.h5"
    write_snapshot(path, dataset, np.ones((100, 5), np.float32))
    before = sha(path)
    with pytest.raises(RuntimeError):
        with atomic.update(path) as f:
            writers.begin_snapshot(f, "tiny")
            raise RuntimeError("engine crashed mid-update")
    assert sha(path) == before and not list(tmp_path.glob(".tiny.h5.tmp-*"))


def test_create_golden_refuses_other_dataset(tmp_path: Path, dataset: GoldenDataset) -> None:
    path = tmp_path / "tiny.h5"
    create_golden(str(path), dataset)
    create_golden(str(path), dataset)  # same content: fine
    other = GoldenDataset.from_arrays({"x": np.zeros((3, 8), np.float32)})
    with pytest.raises(GoldenError, match="different golden dataset"):
        create_golden(str(path), other)


def test_show_lists_dataset_snapshots_and_approvals(tmp_path: Path, dataset: GoldenDataset) -> None:
    path = tmp_path / "tiny.h5"
    write_snapshot(path, dataset, np.ones((100, 5), np.float32), "TRT 10.13 upgrade, CR-1234")
    write_snapshot(path, dataset, np.ones((100, 5), np.float32), "again")
    text = golden_show(path)
    assert "dataset: 100 samples" in text and "input x: float32 (100, 8)" in text
    assert "snapshot tiny: generation 2 (generations kept: 1, 2)" in text
    assert "backend onnxruntime 1.32.0" in text and "approvals: 2" in text
    data = golden_show_json(path)
    assert data["dataset"]["tags"] == {"edge": 10, "past-error": 13}
    assert data["snapshots"]["tiny"]["current"]["outputs"]["logits"]["shape"] == [100, 5]
