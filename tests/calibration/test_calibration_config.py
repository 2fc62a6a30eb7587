"""Calibration pins: validation, every field and the data's content in the config hash, every data source."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_trt import BuildConfig, Calibration, ConfigError
from pytest_trt.common.calibration_data import load_samples
from pytest_trt.golden.dataset import GoldenDataset


@pytest.fixture
def npy_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    folder = tmp_path / "calib"
    folder.mkdir()
    for i in range(3):
        np.save(folder / f"b{i}.npy", rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    return folder


def _config(models, calib: Calibration) -> BuildConfig:  # type: ignore[no-untyped-def]
    return BuildConfig(name="c", onnx=models["conv_bn_relu"], precision="int8", calibration=calib)


@pytest.mark.parametrize(("change", "value"), [
    ("algorithm", "minmax"), ("batch_size", 2), ("num_batches", 2), ("per_channel", True),
    ("cache_sha256", "a" * 64), ("algorithm_percentile", 99.9),
])
def test_every_field_enters_the_config_hash(models, npy_dir: Path, tmp_path: Path, change: str, value) -> None:  # type: ignore[no-untyped-def]
    base = Calibration(algorithm="entropy", data=str(npy_dir / "*.npy"), cache=tmp_path / "c.cache")
    if change == "algorithm_percentile":
        other = dataclasses.replace(base, algorithm="percentile", percentile=value)
        base = dataclasses.replace(base, algorithm="percentile")
    else:
        other = dataclasses.replace(base, **{change: value})
    assert _config(models, base).config_hash != _config(models, other).config_hash


def test_data_content_enters_the_hash_but_its_path_does_not(models, npy_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    moved = shutil.copytree(npy_dir, tmp_path / "elsewhere")
    first = _config(models, Calibration(data=str(npy_dir / "*.npy"))).config_hash
    assert _config(models, Calibration(data=str(moved / "*.npy"))).config_hash == first
    arr = np.load(moved / "b1.npy")
    arr[0, 0, 0, 0] += 1.0
    np.save(moved / "b1.npy", arr)
    assert _config(models, Calibration(data=str(moved / "*.npy"))).config_hash != first


@pytest.mark.parametrize(("kwargs", "field", "words"), [
    ({"algorithm": "kl"}, "calibration.algorithm", "'kl' is unknown"),
    ({"batch_size": 0}, "calibration.batch_size", "positive int, got 0"),
    ({"num_batches": True}, "calibration.num_batches", "positive int, got True"),
    ({"algorithm": "minmax", "percentile": 99.0}, "calibration.percentile", "only to algorithm='percentile'"),
    ({"algorithm": "percentile", "percentile": 101}, "calibration.percentile", "in (50, 100]"),
    ({"cache_sha256": "abc"}, "calibration.cache_sha256", "64 lowercase hex"),
    ({"cache_sha256": "a" * 64}, "calibration.cache_sha256", "give cache= too"),
    ({"data": 3}, "calibration.data", "got int"),
    ({"algorithm": "entropy2", "per_channel": True}, "calibration.per_channel", "explicit Q/DQ"),
])
def test_bad_fields_name_the_field(kwargs, field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace("]", r"\]")) as ei:
        Calibration(**kwargs)
    assert ei.value.field == field


def test_toml_pins_resolve_calibration_paths_against_the_file(models, npy_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    shutil.copy(models["conv_bn_relu"], npy_dir.parent / "m.onnx")
    pins = npy_dir.parent / "pins.toml"
    pins.write_text('[configs.q]\nonnx = "m.onnx"\nprecision = "int8"\n'
                    '[configs.q.calibration]\nalgorithm = "minmax"\ndata = "calib/*.npy"\ncache = "q.cache"\n')
    cfg = BuildConfig.from_toml(pins, "q")
    assert cfg.calibration is not None and cfg.calibration.cache == npy_dir.parent / "q.cache"
    assert load_samples(cfg.calibration, input_name="x").n == 12
    pins.write_text(pins.read_text().replace('cache = "q.cache"', 'cache = "q.cache"\nbins = 2048'))
    with pytest.raises(ConfigError, match=r"pins.toml \[configs.q\]: BuildConfig 'q': unknown key\(s\) bins under calibration") as ei:
        BuildConfig.from_toml(pins, "q")
    assert ei.value.field == "calibration.bins"


def test_every_data_source_gives_the_same_samples(npy_dir: Path, tmp_path: Path) -> None:
    import h5py

    arrays = np.concatenate([np.load(p) for p in sorted(npy_dir.glob("*.npy"))])
    labels = np.arange(len(arrays)) % 3
    np.savez(tmp_path / "all.npz", input=arrays, labels=labels)
    with h5py.File(tmp_path / "calib.h5", "w") as fh:
        fh["input"] = arrays
        fh["labels"] = labels
    sources = {
        "npy glob": Calibration(data=str(npy_dir / "*.npy")),
        "npz": Calibration(data=str(tmp_path / "*.npz")),
        "hdf5": Calibration(data=str(tmp_path / "calib.h5")),
        "golden": Calibration(data=GoldenDataset.from_arrays({"input": arrays}, labels=labels)),
        "callable": Calibration(data=lambda: ({"input": arrays[i : i + 5]} for i in range(0, 12, 5))),
    }
    for what, calib in sources.items():
        samples = load_samples(calib, input_name="input")
        np.testing.assert_array_equal(samples.inputs["input"], arrays, err_msg=what)
        if what in ("npz", "hdf5", "golden"):
            assert samples.class_counts() == {0: 4, 1: 4, 2: 4}, what
    batches = list(load_samples(sources["npz"]).batches(5, num_batches=2))
    assert [len(b["input"]) for b in batches] == [5, 5]


def test_unusable_data_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="matches no .npy or .npz file"):
        load_samples(Calibration(data=str(tmp_path / "none*.npy")))
    np.save(tmp_path / "a.npy", np.zeros((2, 3)))
    np.save(tmp_path / "b.npy", np.zeros((2, 4)))
    with pytest.raises(ConfigError, match="cannot be stacked"):
        load_samples(Calibration(data=str(tmp_path / "*.npy")), input_name="x")
