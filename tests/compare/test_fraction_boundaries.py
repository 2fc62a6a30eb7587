"""Top-1 thresholds are inclusive, like L2: a drop (or an agreement) exactly at its threshold passes.

The figures are counts of samples (fixed numbers, worked out by hand): 920 of 1000 right in the golden
and 915 now is a drop of exactly 5/1000 = 0.5 points, the ``top1_drop=0.005`` boundary; 914 is 0.6 points.
Float arithmetic gives 0.92 - 0.915 = 0.0050000000000000044, which a plain ``<=`` reads as a breach; the
comparison is in whole samples, so a threshold one float step tighter still fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_trt.config import BuildConfig
from pytest_trt.errors import GoldenRegression
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, GoldenSettings

N, CLASSES = 1000, 10


def _logits(right: int, labels: np.ndarray) -> np.ndarray:
    """Scores whose argmax is the label for the first ``right`` samples and the next class after it."""
    pred = labels.copy()
    pred[right:] = (labels[right:] + 1) % CLASSES
    out = np.zeros((N, CLASSES), np.float32)
    out[np.arange(N), pred] = 5.0
    return out


def _approve(tmp_path: Path, *, labelled: bool) -> tuple[Path, BuildConfig, np.ndarray]:
    onnx_path = tmp_path / "m.onnx"
    onnx_path.write_bytes(b"fraction boundary model")
    config = BuildConfig(name="frac", onnx=onnx_path)
    labels = np.arange(N) % CLASSES
    data = GoldenDataset.from_arrays({"x": np.arange(N, dtype=np.float32)[:, None]},
                                     labels=labels if labelled else None)
    folder = tmp_path / "golden"
    GoldenCheck(GoldenSettings(golden_dir=folder, update=True, approve="920 of 1000"),
                config_provider=lambda: config).check({"logits": _logits(920, labels)}, dataset=data,
                                                      classifier=["logits"])
    return folder, config, labels


@pytest.fixture
def approved(tmp_path: Path) -> tuple[Path, BuildConfig, np.ndarray]:
    return _approve(tmp_path, labelled=True)


@pytest.fixture
def unlabelled(tmp_path: Path) -> tuple[Path, BuildConfig, np.ndarray]:
    return _approve(tmp_path, labelled=False)


def _check(folder: Path, config: BuildConfig, outputs: dict[str, np.ndarray], **thresholds: object) -> CheckResult:
    result = GoldenCheck(GoldenSettings(golden_dir=folder), config_provider=lambda: config).check(
        outputs, classifier=["logits"], l2_delta=10.0, drift_sd=1e9, **thresholds)
    assert isinstance(result, CheckResult)
    return result


def test_accuracy_drop_exactly_at_top1_drop_passes(approved: tuple[Path, BuildConfig, np.ndarray]) -> None:
    folder, config, labels = approved
    result = _check(folder, config, {"logits": _logits(915, labels)}, top1_drop=0.005, top1_agreement=0.0)
    metrics = result.metrics["logits"]
    assert (metrics.golden_accuracy, metrics.accuracy) == (0.92, 0.915)


def test_accuracy_drop_one_sample_past_top1_drop_fails(approved: tuple[Path, BuildConfig, np.ndarray]) -> None:
    folder, config, labels = approved
    with pytest.raises(GoldenRegression, match=r"Top-1 Acc drop: -0\.6% < threshold\(-0\.5%\)"):
        _check(folder, config, {"logits": _logits(914, labels)}, top1_drop=0.005, top1_agreement=0.0)


def test_agreement_exactly_at_the_default_one_minus_top1_drop_passes(
        unlabelled: tuple[Path, BuildConfig, np.ndarray]) -> None:
    """Without labels, top1_agreement defaults to 1 - top1_drop (0.995): 5 of 1000 samples changed is within it."""
    folder, config, labels = unlabelled
    result = _check(folder, config, {"logits": _logits(915, labels)})
    assert result.metrics["logits"].top1_agreement == 995 / N
    with pytest.raises(GoldenRegression, match=r"Top-1 agreement: 99\.4% < threshold\(99\.5%\)"):
        _check(folder, config, {"logits": _logits(914, labels)})


def test_a_threshold_one_ulp_past_the_boundary_still_fails(approved: tuple[Path, BuildConfig, np.ndarray]) -> None:
    """Whole samples, no slack: a top1_drop one float step below 5/1000 fails a drop of 5 samples."""
    folder, config, labels = approved
    with pytest.raises(GoldenRegression, match=r"Top-1 Acc drop"):
        _check(folder, config, {"logits": _logits(915, labels)}, top1_drop=float(np.nextafter(0.005, 0.0)),
               top1_agreement=0.0)
