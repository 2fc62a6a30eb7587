"""Creating golden datasets: arrays, folders of .npy/.npz, Polygraphy JSON."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest

from pytest_trt.errors import GoldenError
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.polygraphy_import import load_polygraphy_inputs, load_polygraphy_outputs, polygraphy_runners

SHARED = Path(__file__).resolve().parents[1] / "data" / "polygraphy" / "polygraphy_outputs_trt8.6.1_cookbook_mnist.json"


def npy_b64(arr: np.ndarray) -> dict[str, str]:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return {"array": base64.b64encode(buf.getvalue()).decode(), "polygraphy_class": "ndarray"}


def test_from_arrays_validates_and_digests() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = GoldenDataset.from_arrays({"x": x}, labels=[0, 1, 2], tags=["edge", "", "past-error"])
    assert a.n == 3 and a.labels is not None and a.labels.dtype == np.int64
    assert a.digest() == GoldenDataset.from_arrays({"x": x.copy()}, [0, 1, 2], ["edge", "", "past-error"]).digest()
    assert a.digest() != GoldenDataset.from_arrays({"x": x}, [0, 1, 1], ["edge", "", "past-error"]).digest()
    with pytest.raises(GoldenError, match="same number of samples"):
        GoldenDataset.from_arrays({"x": x, "y": np.zeros((2, 1))})
    with pytest.raises(GoldenError, match="without '/'"):
        GoldenDataset.from_arrays({"a/b": x})
    with pytest.raises(GoldenError, match="no samples"):
        GoldenDataset.from_arrays({"x": np.zeros((0, 4))})


def test_from_directory_npy_and_npz(tmp_path: Path) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    np.save(flat / "x.npy", np.ones((5, 2), np.float32))
    np.save(flat / "labels.npy", np.arange(5))
    (flat / "tags.txt").write_text("edge\n\n\npast-error\nedge,past-error\n")
    ds = GoldenDataset.from_directory(flat)
    assert ds.n == 5 and ds.tags == ("edge", "", "", "past-error", "edge,past-error")
    batches = tmp_path / "batches"
    batches.mkdir()
    for i in range(3):
        np.savez(batches / f"batch{i:03d}.npz", x=np.full((2, 2), i, np.float32), labels=np.array([i, i]))
    ds = GoldenDataset.from_directory(batches)
    assert ds.n == 6 and list(ds.labels) == [0, 0, 1, 1, 2, 2] and float(ds.inputs["x"][-1, 0]) == 2
    with pytest.raises(GoldenError, match="holds no .npy or .npz"):
        GoldenDataset.from_directory(tmp_path / "flat" / "..")
    with pytest.raises(GoldenError, match=f"does not exist \\(looked for {tmp_path / 'nowhere'}; relative paths"):
        GoldenDataset.from_directory(tmp_path / "nowhere")
    np.save(flat / "labels.npy", np.arange(4))
    with pytest.raises(GoldenError, match=r"labels have shape \(4,\); expected \(5,\)"):
        GoldenDataset.from_directory(flat)


def test_polygraphy_outputs_from_the_corpus() -> None:
    assert polygraphy_runners(SHARED) == ["trt-runner-N0-08/24/23-07:55:24"]
    out = load_polygraphy_outputs(SHARED)
    assert out["A-V-12-Add"].shape == (4, 10) and out["A-V-12-Add"].dtype == np.float32
    assert out["A-V-14-ArgMax"].shape == (4,)
    assert list(out["A-V-14-ArgMax"]) == list(np.argmax(out["A-V-12-Add"], axis=1))


def test_polygraphy_inputs_and_new_style_outputs(tmp_path: Path) -> None:
    feeds = [{"x": npy_b64(np.full((2, 3), i, np.float32))} for i in range(3)]
    (tmp_path / "inputs.json").write_text(json.dumps(feeds))
    ds = load_polygraphy_inputs(tmp_path / "inputs.json", labels=[0, 1, 2, 0, 1, 2])
    assert ds.n == 6 and float(ds.inputs["x"][5, 0]) == 2.0
    lazy = {"values": npy_b64(np.ones((2, 4), np.float32)), "polygraphy_class": "LazyArray"}
    results = {"lst": [["ort", [{"outputs": {"y": lazy}, "polygraphy_class": "IterationResult"}]],
                       ["trt", [{"outputs": {"y": lazy}, "polygraphy_class": "IterationResult"}]]],
               "polygraphy_class": "RunResults"}
    (tmp_path / "outputs.json").write_text(json.dumps(results))
    with pytest.raises(GoldenError, match="pass runner= to choose one"):
        load_polygraphy_outputs(tmp_path / "outputs.json")
    assert load_polygraphy_outputs(tmp_path / "outputs.json", runner="trt")["y"].shape == (2, 4)
    (tmp_path / "bad.json").write_text('{"lst": []}')
    with pytest.raises(GoldenError, match="not a Polygraphy RunResults file"):
        load_polygraphy_outputs(tmp_path / "bad.json")
