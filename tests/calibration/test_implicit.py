"""TensorRT <= 10 implicit INT8: batch feeding and cache I/O on the CPU, calibrator classes where a module has them.

The feeding test uses a stand-in for the device buffer (it records what would be copied); it checks the
feeder's logic, not a TensorRT result.  The calibrator classes are subclassed from the real module: TensorRT-RTX
1.4 still exports them (1.7 does not), NVIDIA TensorRT <= 10 has them.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pytest_trt.backends.trt_calibrator import (
    CALIBRATOR_CLASSES,
    BatchFeeder,
    CacheIO,
    make_calibrator,
    reported_algorithm,
)
from tests.conftest import HAS_TRT

DATA = Path(__file__).resolve().parents[1] / "data" / "trt_logs"


class RecordingBuffer:
    """Stands in for backends.cuda.DeviceBuffer: a fake pointer and the arrays it was given."""

    count = 0

    def __init__(self) -> None:
        RecordingBuffer.count += 1
        self.ptr = 0x1000 * RecordingBuffer.count
        self.uploads: list[np.ndarray] = []

    def upload(self, array: np.ndarray, stream: object) -> None:
        self.uploads.append(array.copy())


class Stream:
    syncs = 0

    def synchronize(self) -> None:
        Stream.syncs += 1


def test_feeder_uploads_each_batch_in_tensorrts_input_order() -> None:
    rng = np.random.default_rng(0)
    batches = [{"a": rng.standard_normal((2, 3)), "b": rng.standard_normal((2, 1))} for _ in range(3)]
    batches.append({"a": np.zeros((1, 3)), "b": np.zeros((1, 1))})  # short last batch
    made: list[RecordingBuffer] = []

    def factory() -> RecordingBuffer:
        made.append(RecordingBuffer())
        return made[-1]

    stream = Stream()
    feeder = BatchFeeder(batches, batch_size=2, buffer_factory=factory, stream=stream)
    pointers = [feeder.next_pointers(["b", "a"]) for _ in range(3)]
    assert feeder.next_pointers(["b", "a"]) is None
    assert pointers[0] == pointers[1] == pointers[2] == [made[0].ptr, made[1].ptr]  # buffers are reused
    assert len(made) == 2 and feeder.fed == 3 and feeder.dropped == 1
    np.testing.assert_array_equal(made[1].uploads[2], batches[2]["a"].astype(np.float32))
    assert made[1].uploads[0].dtype == np.float32 and made[1].uploads[0].flags.c_contiguous
    with pytest.raises(KeyError, match="no input 'c'"):
        BatchFeeder(batches, batch_size=2, buffer_factory=factory, stream=stream).next_pointers(["c"])


def test_cache_io_reads_only_caches_of_its_algorithm(tmp_path: Path) -> None:
    path = tmp_path / "calib.cache"
    io = CacheIO(path, "entropy2")
    assert io.read() is None and io.events[-1] == "cache absent: calibrating"
    real = (DATA / "calib_trt8.6.1_entropy2_segformer.cache").read_bytes()
    io.write(real)
    assert path.read_bytes() == real and io.events[-1].startswith("cache written:")
    assert io.read() == real and "TRT-8601-EntropyCalibration2" in io.events[-1]
    minmax = CacheIO(path, "minmax")
    assert minmax.read() is None
    assert "cache ignored" in minmax.events[-1] and "MinMaxCalibration" in minmax.events[-1]


def _modules_with_calibrators() -> list[str]:
    found = []
    for name in ("tensorrt", "tensorrt_rtx"):
        if importlib.util.find_spec(name) is not None and hasattr(importlib.import_module(name), "IInt8MinMaxCalibrator"):
            found.append(name)
    return found


@pytest.mark.skipif(not _modules_with_calibrators(), reason="no installed TensorRT module exports IInt8*Calibrator "
                    "classes (TensorRT-RTX 1.7 removed them; run tox -e rtx14, or install TensorRT <= 10)")
@pytest.mark.parametrize("algorithm", list(CALIBRATOR_CLASSES))
def test_calibrators_subclass_tensorrts_class_and_report_their_algorithm(algorithm: str, tmp_path: Path) -> None:
    trt = importlib.import_module(_modules_with_calibrators()[0])
    buffers: list[RecordingBuffer] = []
    feeder = BatchFeeder([{"x": np.ones((4, 2))}], batch_size=4,
                         buffer_factory=lambda: buffers.append(RecordingBuffer()) or buffers[-1], stream=Stream())
    cache = CacheIO(tmp_path / "c.cache", algorithm)
    calibrator = make_calibrator(trt, algorithm, feeder, cache)
    assert isinstance(calibrator, getattr(trt, CALIBRATOR_CLASSES[algorithm]))
    assert reported_algorithm(calibrator) == algorithm  # TensorRT's own get_algorithm()
    assert calibrator.get_batch_size() == 4
    assert calibrator.get_batch(["x"]) == [buffers[0].ptr] and calibrator.get_batch(["x"]) is None
    assert calibrator.read_calibration_cache() is None


@pytest.mark.skipif(not HAS_TRT, reason="implicit INT8 builds need NVIDIA TensorRT <= 10 (module tensorrt, not "
                    "installable here) and an NVIDIA GPU for the calibration batches")
def test_implicit_int8_build_with_a_calibrator(models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pytest_trt import BuildConfig, Calibration
    from pytest_trt.backends.registry import create_backend

    np.save(tmp_path / "calib.npy", np.random.default_rng(0).standard_normal((8, 3, 32, 32)).astype(np.float32))
    config = BuildConfig(name="imp", onnx=models["mobilenet_v2_b1"], precision="int8",
                         calibration=Calibration(algorithm="entropy2", data=str(tmp_path / "calib.npy"),
                                                 cache=tmp_path / "c.cache"))
    backend = create_backend("tensorrt")
    result = backend.build_config(config)
    assert result.effective_config["calibrator"]["algorithm"] == "entropy2"
    assert (tmp_path / "c.cache").read_text().split("-")[2].startswith("EntropyCalibration2")
    backend.record(result, config)


class NoTensorRT:
    """Stands in for the TensorRT module and builder config: any use of it is the failure under test."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"TensorRT was used ({name}) before the calibration-cache pin was checked")

    def __setattr__(self, name: str, value: object) -> None:
        raise AssertionError(f"TensorRT was configured ({name}) before the calibration-cache pin was checked")


def _implicit_config(tmp_path: Path, cache: Path, pinned: str | None):  # type: ignore[no-untyped-def]
    from pytest_trt import BuildConfig, Calibration
    from pytest_trt.testing import write_classifier

    np.save(tmp_path / "calib.npy", np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32))
    return BuildConfig(name="implicit_pin", onnx=write_classifier(tmp_path / "m.onnx"), precision="int8",
                       calibration=Calibration(algorithm="entropy2", data=str(tmp_path / "calib.npy"), batch_size=4,
                                               cache=cache, cache_sha256=pinned))


def test_implicit_pin_is_checked_before_tensorrt_reads_the_cache(tmp_path: Path) -> None:
    """A real TensorRT 8.6 cache that the pin does not name: the build stops before TensorRT sees it."""
    import hashlib

    from pytest_trt.backends.trt_calibrator import attach_calibrator, check_pinned_cache
    from pytest_trt.errors import BuildFailed

    cache = tmp_path / "c.cache"
    real = (DATA / "calib_trt8.6.1_entropy2_segformer.cache").read_bytes()
    cache.write_bytes(real)
    found = hashlib.sha256(real).hexdigest()  # what sha256sum prints for the file
    pinned = "ab" * 32
    config = _implicit_config(tmp_path, cache, pinned)
    try:  # any other outcome (TensorRT touched, the CUDA layer missing: a skip under the plugin) is a failure
        attach_calibrator(NoTensorRT(), NoTensorRT(), config)
    except Exception as exc:  # noqa: BLE001
        raised: BaseException | None = exc
    else:
        raised = None
    assert isinstance(raised, BuildFailed), f"expected BuildFailed before TensorRT, got {raised!r}"
    assert found in str(raised) and pinned in str(raised) and str(cache) in str(raised)
    assert raised.stage == "calibration"
    # the pin that names the file passes the check; no file yet passes too (the calibrator writes it, checked after)
    check_pinned_cache(_implicit_config(tmp_path, cache, found), before_build=True)
    check_pinned_cache(_implicit_config(tmp_path, tmp_path / "none.cache", pinned), before_build=True)
    with pytest.raises(BuildFailed, match=r"\(no cache written\)"):  # after the build a missing file is a failure
        check_pinned_cache(_implicit_config(tmp_path, tmp_path / "none.cache", pinned))


def test_calibrator_cache_io_never_hands_tensorrt_an_unpinned_cache(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "c.cache"
    real = (DATA / "calib_trt8.6.1_entropy2_segformer.cache").read_bytes()
    path.write_bytes(real)
    assert CacheIO(path, "entropy2", pinned=hashlib.sha256(real).hexdigest()).read() == real
    refused = CacheIO(path, "entropy2", pinned="0" * 64)
    assert refused.read() is None
    assert refused.events[-1].startswith(f"cache refused: {path} sha256 {hashlib.sha256(real).hexdigest()}")
