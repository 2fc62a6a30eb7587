"""Streaming accumulation of one output against an HDF5 golden, batch by batch, with reused work buffers.

Expected figures come from whole-array float64 numpy written out here, never from the accumulator.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from pytest_trt.compare.accumulate import OutputAccumulator
from pytest_trt.compare.workspace import Workspace, read_rows


def _golden(tmp_path: Path, **arrays: np.ndarray) -> h5py.File:
    f = h5py.File(tmp_path / "g.h5", "w")
    for name, arr in arrays.items():
        f.create_dataset(name, data=arr)
    return f


def _feed(acc: OutputAccumulator, obtained: np.ndarray, batch: int) -> None:
    for start in range(0, obtained.shape[0], batch):
        acc.update(start, obtained[start : start + batch].copy())


def test_read_rows_reuses_one_buffer_and_matches_slicing(tmp_path: Path) -> None:
    data = np.arange(70, dtype=np.float32).reshape(35, 2)
    with _golden(tmp_path, d=data) as f:
        work = Workspace()
        first = read_rows(f["d"], 0, 16, work, "g")
        np.testing.assert_array_equal(first, data[:16])
        last = read_rows(f["d"], 32, 16, work, "g")  # the short last batch
        np.testing.assert_array_equal(last, data[32:])
        assert np.shares_memory(first, last)  # one buffer, no fresh temporary per batch
    np.testing.assert_array_equal(read_rows(data, 5, 3, work, "g"), data[5:8])  # arrays are sliced


def test_class_indices_agree_over_batches_of_a_reused_buffer(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    golden = rng.integers(0, 10, 1000).astype(np.int64)
    obtained = golden.copy()
    obtained[rng.choice(1000, 137, replace=False)] += 1  # 137 answers change
    labels = golden.copy()
    with _golden(tmp_path, pred=golden) as f:
        acc = OutputAccumulator("pred", f["pred"], declared=True, labels=labels)
        _feed(acc, obtained, 64)
        m = acc.result(1000, None)
    assert m.top1_agreement == pytest.approx(0.863)
    assert m.accuracy == pytest.approx(0.863) and m.golden_accuracy == 1.0


def test_logits_over_batches_match_whole_array_float64(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    golden = (rng.standard_normal((300, 1000)) * 4).astype(np.float32)
    obtained = golden + (rng.standard_normal(golden.shape) * 0.05).astype(np.float32)
    with _golden(tmp_path, logits=golden) as f:
        acc = OutputAccumulator("logits", f["logits"], declared=True)
        _feed(acc, obtained, 64)
        m = acc.result(300, None)
        stats = {k: s.head() for k, s in acc.tally.stats.items()}  # the first BOOTSTRAP_MAX values: all 300
    o, g = obtained.astype(np.float64), golden.astype(np.float64)
    assert m.elements.l2_delta == pytest.approx(np.linalg.norm(o - g) / np.linalg.norm(g), rel=1e-9)
    assert m.elements.max_abs == pytest.approx(np.abs(o - g).max(), rel=1e-6)
    assert m.elements.cosine == pytest.approx(float(o.ravel() @ g.ravel()) / (np.linalg.norm(o) * np.linalg.norm(g)),
                                              abs=1e-12)
    assert m.top1_agreement == pytest.approx(np.mean(o.argmax(axis=1) == g.argmax(axis=1)))
    p = np.exp(o - o.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    top2 = np.sort(p, axis=1)[:, -2:]
    np.testing.assert_allclose(stats["max_confidence"], top2[:, 1], atol=2e-6, rtol=1e-5)
    np.testing.assert_allclose(stats["top2_margin"], top2[:, 1] - top2[:, 0], atol=2e-6, rtol=1e-5)
    np.testing.assert_allclose(stats["entropy"], -(p * np.log(p)).sum(axis=1), atol=2e-6, rtol=1e-5)



@pytest.mark.parametrize("name", ["logits", "output/logits", "cls_logits", "probs", "class_scores", "cls_scores"])
def test_float_logits_are_class_scores_without_labels(name: str) -> None:
    """Unlabelled, unnormalized (N, 10) scores: the name alone makes them class scores, so top-1 agreement is
    computed by default; the same array named ``features`` or ``scores`` (box scores) is not."""
    rng = np.random.default_rng(5)
    golden = rng.standard_normal((32, 10)).astype(np.float32) * 4  # rows are not probabilities
    obtained = golden.copy()
    obtained[:4] = obtained[:4, ::-1]  # 4 samples change their top-1 (reversed rows move the argmax)
    expected = float(np.mean(np.argmax(obtained, 1) == np.argmax(golden, 1)))
    assert expected < 1.0
    acc = OutputAccumulator(name, golden, max_label=None)
    acc.update(0, obtained)
    assert acc.classifier and acc.result(32, None).top1_agreement == pytest.approx(expected)
    for other in ("features", "scores", "embedding"):
        control = OutputAccumulator(other, golden, max_label=None)
        control.update(0, obtained)
        assert not control.classifier and control.result(32, None).top1_agreement is None
