"""The incident, reproduced: a digits classifier whose INT8 calibration switched from entropy to min-max.

``digits_mnet.onnx`` was trained here (``train_digits.py``: scikit-learn's 8x8
digits, MobileNet-style depthwise conv + BN + ReLU6 blocks, fixed seed).  The
calibration set is 64 training images of which a heavy-tailed minority (4%)
are outliers: images whose pixel gain was drawn from a Pareto distribution
(as from a camera whose gain control failed).  Min-max calibration stretches
every range to cover them and loses resolution on the normal images; entropy
calibration (TensorRT's KL threshold search) clips them.  The two configs
differ only in ``Calibration.algorithm``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from pytest_trt import BuildConfig, Calibration, Profile
from pytest_trt.common.fileio import write_bytes_atomic
from pytest_trt.golden.dataset import GoldenDataset

HERE = Path(__file__).parent
MODEL = HERE / "digits_mnet.onnx"
DIGITS = HERE / "digits.npz"
CALIBRATION_NPZ = HERE / "generated" / "calibration.npz"
SEED = 0
SAMPLES = 64
OUTLIER_FRACTION = 0.04
OUTLIER_GAIN = 60.0


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Images as float32 (N, 1, 8, 8) in [0, 1], labels, and the train / test index split of training."""
    with np.load(DIGITS) as d:
        x = d["pixels"].astype(np.float32)[:, None] / 16.0
        return x, d["labels"].astype(np.int64), d["train"], d["test"]


def calibration_arrays(samples: int = SAMPLES, *, seed: int = SEED, fraction: float = OUTLIER_FRACTION,
                       gain: float = OUTLIER_GAIN) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` training images with a heavy-tailed minority of outliers, and their labels."""
    x, y, train, _ = digits()
    rng = np.random.default_rng(seed)
    images, labels = x[train[:samples]].copy(), y[train[:samples]]
    k = max(1, round(fraction * samples))
    idx = rng.choice(samples, k, replace=False)
    gains = 1.0 + gain * (rng.pareto(1.5, k) + 1.0) / 2.0
    images[idx] *= gains[:, None, None, None].astype(np.float32)
    return images, labels


def write_calibration_set(path: Path = CALIBRATION_NPZ, **kwargs: float) -> Path:
    """Write the calibration set as ``.npz`` (keys ``input`` and ``labels``); same bytes every time."""
    import io

    images, labels = calibration_arrays(**kwargs)  # type: ignore[arg-type]
    buf = io.BytesIO()
    np.savez(buf, input=images, labels=labels)
    if not path.is_file() or path.read_bytes() != buf.getvalue():
        write_bytes_atomic(path, buf.getvalue())
    return path


def golden_dataset() -> GoldenDataset:
    """The 597 held-out test images with their labels: what accuracy is judged on."""
    x, y, _, test = digits()
    return GoldenDataset.from_arrays({"input": x[test]}, labels=y[test])


def configs(calibration_file: Path | None = None) -> tuple[BuildConfig, BuildConfig]:
    """(approved: entropy, upgraded: min-max); the same model, name, version and data."""
    data = str(calibration_file or write_calibration_set())
    approved = BuildConfig(
        name="digits_mnet", version="1.0.0", onnx=MODEL, precision="int8",
        profiles=[Profile(input=((1, 1, 8, 8), (64, 1, 8, 8), (256, 1, 8, 8)))],
        calibration=Calibration(algorithm="entropy", data=data, batch_size=8),
    )
    assert approved.calibration is not None
    upgraded = approved.replace(calibration=dataclasses.replace(approved.calibration, algorithm="minmax"))
    return approved, upgraded


if __name__ == "__main__":
    import sys

    # python -m examples.calibration.incident calib/set.npz: write the calibration set there
    print(write_calibration_set(Path(sys.argv[1]) if len(sys.argv) > 1 else CALIBRATION_NPZ))
