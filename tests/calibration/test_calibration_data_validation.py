"""Bad calibration data is a clear error naming the config, the file and the input; all-zero data warns.

Every case is a real file on disk built through a real backend (ONNX Runtime; TensorRT-RTX where installed): the
error must come from pytest-trt (``ConfigError`` / ``BuildFailed``), never an onnxruntime, numpy or h5py exception.
The expected texts are this file's own: the file names, the config names, the input name ``x`` of the model.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_trt import BuildConfig, Calibration, Profile
from pytest_trt.errors import BuildFailed, ConfigError, TrtError
from pytest_trt.testing import write_classifier
from tests.conftest import HAS_RTX, RTX_MM, needs_ort

pytestmark = needs_ort

GOOD = np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("calib-bad")
    write_classifier(str(root / "tiny.onnx"))
    write_classifier(str(root / "other.onnx"), seed=3)
    return root


def _config(project: Path, case: str, data: Any, *, onnx: str = "tiny.onnx", **calib: Any) -> BuildConfig:
    return BuildConfig(name=f"calib_{case}", onnx=project / onnx, precision="int8",
                       profiles=[Profile(x=((1, 8), (8, 8), (32, 8)))],
                       calibration=Calibration(algorithm="minmax", batch_size=8, data=data, **calib))


def _build(config: BuildConfig, backend: str = "onnxruntime") -> Any:
    from pytest_trt.backends.registry import create_backend

    return create_backend(backend).build_config(config)


def _npz(project: Path, case: str, **arrays: np.ndarray) -> str:
    folder = project / case
    folder.mkdir(exist_ok=True)
    np.savez(folder / "b0.npz", **arrays)
    return str(folder / "*.npz")


def _expect(build: Callable[[], Any], kind: type[TrtError], *parts: str) -> str:
    """``build()`` raises ``kind`` (a pytest-trt error) whose text holds every part."""
    with pytest.raises(TrtError) as ei:
        build()
    text = str(ei.value)
    assert isinstance(ei.value, kind), (type(ei.value), text)
    for part in parts:
        assert part in text, (part, text)
    return text


def test_good_data_builds_with_the_minmax_range_of_the_data(project: Path) -> None:
    result = _build(_config(project, "good", _npz(project, "good", x=GOOD)))
    ranges = result.extra["calibration"]["ranges"]
    assert ranges["x"][1] == pytest.approx(float(np.abs(GOOD).max()), rel=1e-6)  # symmetric: amax of the data


@pytest.mark.parametrize(("case", "row", "what"), [("nan", 3, "NaN"), ("inf", 5, "Inf")])
def test_non_finite_samples_are_refused_naming_the_sample(project: Path, case: str, row: int, what: str) -> None:
    bad = GOOD.copy()
    bad[row, 1] = np.nan if what == "NaN" else -np.inf
    data = _npz(project, case, x=bad)
    text = _expect(lambda: _build(_config(project, case, data)), ConfigError,
                   f"'calib_{case}'", str(project / case / "b0.npz"), "input 'x'", f"sample {row} holds {what}")
    assert "1 of 32 samples" in text


def test_non_finite_samples_in_a_callable_name_the_batch(project: Path) -> None:
    bad = GOOD.copy()
    bad[9, 0] = np.nan

    def batches() -> list[dict[str, np.ndarray]]:
        return [{"x": bad[:8]}, {"x": bad[8:16]}]

    _expect(lambda: _build(_config(project, "nan_callable", batches)), ConfigError,
            "'calib_nan_callable'", "batch 1: input 'x' sample 1 holds NaN")


def test_wrong_shape_names_both_shapes(project: Path) -> None:
    data = _npz(project, "wrong_shape", x=GOOD[:, :5].copy())
    _expect(lambda: _build(_config(project, "wrong_shape", data)), ConfigError,
            "'calib_wrong_shape'", data, "input 'x'", "(32, 5)", "(N, 8)")


def test_int64_for_a_float_input_names_both_dtypes(project: Path) -> None:
    data = _npz(project, "int64", x=np.arange(32 * 8, dtype=np.int64).reshape(32, 8))
    _expect(lambda: _build(_config(project, "int64", data)), ConfigError,
            "'calib_int64'", data, "input 'x'", "int64", "float32")


def test_wrong_npz_key_names_the_key_and_the_input(project: Path) -> None:
    data = _npz(project, "wrong_key", input=GOOD)
    _expect(lambda: _build(_config(project, "wrong_key", data)), ConfigError,
            "'calib_wrong_key'", data, "no data for input(s) 'x'", "holds 'input'")


def test_empty_npy_file(project: Path) -> None:
    (project / "empty_npy").mkdir()
    (project / "empty_npy" / "x.npy").write_bytes(b"")
    data = str(project / "empty_npy" / "*.npy")
    _expect(lambda: _build(_config(project, "empty_npy", data)), ConfigError,
            "'calib_empty_npy'", str(project / "empty_npy" / "x.npy"), "an empty file")


def test_npy_with_zero_rows(project: Path) -> None:
    (project / "zero_rows").mkdir()
    np.save(project / "zero_rows" / "x.npy", np.zeros((0, 8), np.float32))
    data = str(project / "zero_rows" / "*.npy")
    _expect(lambda: _build(_config(project, "zero_rows", data)), ConfigError,
            "'calib_zero_rows'", data, "0 samples", "the model's single input")


def test_corrupt_hdf5(project: Path) -> None:
    path = project / "corrupt.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + b"garbage" * 100)
    _expect(lambda: _build(_config(project, "corrupt_h5", str(path))), ConfigError,
            "'calib_corrupt_h5'", f"HDF5 file {path} cannot be read")


def test_all_zero_data_builds_with_a_warning(project: Path) -> None:
    data = _npz(project, "zeros", x=np.zeros((32, 8), np.float32))
    with pytest.warns(UserWarning, match=r"'calib_zeros'.*input 'x' is all zero"):
        _build(_config(project, "zeros", data))


def test_cache_of_another_model_names_its_tensors(project: Path) -> None:
    """A cache the other model's calibration wrote, read for this model: its tensors are not this model's."""
    import onnx

    other = onnx.load(str(project / "other.onnx"))
    renamed = {"logits": "other_logits"}
    for node in other.graph.node:
        node.output[:] = [renamed.get(o, o) for o in node.output]
        node.input[:] = [renamed.get(i, i) for i in node.input]
    for out in other.graph.output:
        out.name = renamed.get(out.name, out.name)
    onnx.save(other, str(project / "other_renamed.onnx"))
    data = _npz(project, "foreign_data", x=GOOD)
    cache = project / "other.cache"
    _build(_config(project, "other", data, onnx="other_renamed.onnx", cache=cache))
    assert "other_logits:" in cache.read_text()
    _expect(lambda: _build(_config(project, "foreign_cache", data, cache=cache)), BuildFailed,
            "'calib_foreign_cache'", str(cache), "'other_logits'", "written for another model")


def test_cache_naming_a_directory(project: Path) -> None:
    folder = project / "cache_dir"
    folder.mkdir()
    data = _npz(project, "dir_data", x=GOOD)
    _expect(lambda: _config(project, "cache_dir", data, cache=folder), ConfigError, str(folder), "is a directory")
    # made a directory after the config was made: refused when the cache is written, naming the config
    late = project / "late_dir"
    config = _config(project, "late_dir", data, cache=late)
    late.mkdir()
    _expect(lambda: _build(config), ConfigError, "'calib_late_dir'", str(late), "is a directory")


@pytest.mark.skipif(not HAS_RTX or RTX_MM == "1.4", reason="needs TensorRT-RTX 1.7 (builds the Q/DQ model)")
def test_tensorrt_rtx_refuses_nan_data_and_builds_good_data(project: Path) -> None:
    bad = GOOD.copy()
    bad[2, 2] = np.nan
    data = _npz(project, "rtx_nan", x=bad)
    _expect(lambda: _build(_config(project, "rtx_nan", data), "tensorrt-rtx"), ConfigError,
            "'calib_rtx_nan'", "sample 2 holds NaN")
    result = _build(_config(project, "rtx_good", _npz(project, "rtx_good", x=GOOD)), "tensorrt-rtx")
    assert result.effective_config["quantization"] == "explicit-qdq"


def test_the_config_hash_path_names_the_config_too(project: Path) -> None:
    """The data digest (config hash, before any build) runs the same checks."""
    bad = GOOD.copy()
    bad[0, 0] = np.inf
    config = _config(project, "hash_inf", _npz(project, "hash_inf", x=bad))
    with pytest.raises(ConfigError, match=re.escape("BuildConfig 'calib_hash_inf'") + ".*sample 0 holds Inf"):
        config.data_sha256  # noqa: B018
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the digest never warns; the calibrating path does, once
        good = _config(project, "hash_zero", _npz(project, "hash_zero", x=np.zeros((4, 8), np.float32)))
        assert len(good.data_sha256 or "") == 64
