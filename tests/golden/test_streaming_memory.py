"""A golden check keeps counts and running moments, not per-sample arrays.

Figures: every classifier figure of a streamed check equals the one computed here from the whole per-sample
arrays with numpy (counts exactly, means and SDs to 1e-12), on both sides of the bootstrap cut and with
non-finite rows.  Memory: the check's tracemalloc peak, measured in a real pytest run of ``trt_golden.check``
at two dataset sizes (a second check in the session, so imports and the file digest's block reads are done), grows
by less than 2 MiB for 10x the samples (per-sample arrays and whole labels/tags grow by ~14 MiB).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from pytest_trt.compare import distribution
from pytest_trt.compare.accumulate import OutputAccumulator
from pytest_trt.compare.output_summary import summarize_output
from pytest_trt.compare.thresholds import Thresholds
from pytest_trt.golden import array_digests

CLASSES = 12
TAGS = ("", "edge", "edge,night", "night", "rare")


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    golden = (rng.standard_normal((n, CLASSES)) * 3).astype(np.float32)
    obtained = golden + (rng.standard_normal(golden.shape) * 0.8).astype(np.float32)
    obtained[5, 3] = -np.inf  # a non-finite row takes the float64 fallback
    labels = rng.integers(0, CLASSES, n).astype(np.int64)
    labels[7] = CLASSES + 4  # a label outside the classes still counts in the confusion rows
    tags = [TAGS[i] for i in rng.integers(0, len(TAGS), n)]
    return golden, obtained, labels, tags


def _streamed(tmp_path: Path, n: int, batch: int) -> tuple[OutputAccumulator, np.ndarray, np.ndarray, np.ndarray,
                                                           list[str], h5py.File]:
    golden, obtained, labels, tags = _data(n, n)
    f = h5py.File(tmp_path / f"g{n}.h5", "w")
    f["out"] = golden
    f["labels"] = labels
    f.create_dataset("tags", data=np.array(tags, dtype=object), dtype=h5py.string_dtype())
    acc = OutputAccumulator("out", f["out"], declared=True, logits=True, labels=f["labels"], tags=f["tags"])
    for start in range(0, n, batch):
        acc.update(start, obtained[start : start + batch].copy())
    return acc, golden, obtained, labels, tags, f


@pytest.mark.parametrize(("n", "batch"), [(3_001, 256), (10_000, 999), (140_003, 4096)])
def test_streamed_figures_equal_whole_array_figures(tmp_path: Path, n: int, batch: int) -> None:
    acc, golden, obtained, labels, tags, f = _streamed(tmp_path, n, batch)
    with f:
        base = distribution.DistributionBaseline(True, tuple(distribution.StatBaseline(k, 0.5, 0.01)
                                                             for k in distribution.STATS))
        m = acc.result(n, base)
        baseline = acc.baseline()
        summary = summarize_output(acc, m, Thresholds())
    o, g = obtained.argmax(axis=1), golden.argmax(axis=1)
    assert m.top1_agreement == float(np.mean(o == g))
    assert m.accuracy == float(np.mean(o == labels)) and m.golden_accuracy == float(np.mean(g == labels))
    for t in m.tags:
        idx = np.array([i for i, text in enumerate(tags) if t.tag in text.split(",")])
        assert (t.count, t.agreement, t.accuracy) == (idx.size, float(np.mean(o[idx] == g[idx])),
                                                      float(np.mean(o[idx] == labels[idx])))
        assert t.golden_accuracy == float(np.mean(g[idx] == labels[idx]))
        assert baseline["tag_accuracy"][t.tag] == t.accuracy
    assert [t.tag for t in m.tags] == ["edge", "night", "rare"]
    assert baseline["accuracy"] == m.accuracy
    # the per-sample statistics of the whole array, as one call computes them
    whole, _ = distribution.per_sample_top1(obtained, logits=True)
    assert np.isfinite(whole["entropy"]).all()
    for d in m.drift:
        assert d.obtained_mean == pytest.approx(float(np.mean(whole[d.stat])), rel=1e-12, abs=0)
    stats = baseline["distribution"]["stats"]
    for k in distribution.STATS:
        v = whole[k]
        assert stats[k]["mean"] == pytest.approx(float(v.mean()), rel=1e-12, abs=0)
        want_sd = (distribution.bootstrap_sd(v) if n <= distribution.BOOTSTRAP_MAX
                   else float(v.std()) / math.sqrt(n))
        assert stats[k]["sd"] == pytest.approx(want_sd, rel=1e-12, abs=0)
        top = math.log(CLASSES) if k == "entropy" else 1.0
        counts, _ = np.histogram(np.clip(v, 0.0, top), bins=24, range=(0.0, top))
        assert summary["histograms"][k] == {"range": [0.0, top], "counts": counts.tolist()}
    pairs: dict[tuple[int, int], int] = {}
    for a, b in zip(labels.tolist(), o.tolist(), strict=True):
        pairs[(a, b)] = pairs.get((a, b), 0) + 1
    assert summary["confusion"] == [[a, b, c] for (a, b), c in sorted(pairs.items())]
    assert summary["classes"] == CLASSES


def test_tags_digest_read_in_slabs_equals_the_whole_lists(tmp_path: Path) -> None:
    tags = [TAGS[i % len(TAGS)] + ("é" if i % 11 == 0 else "") for i in range(1000)]
    want = hashlib.sha256(b"text\0" + json.dumps(tags).encode()).hexdigest()  # the stored digest's definition
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f.create_dataset("tags", data=np.array(tags, dtype=object), dtype=h5py.string_dtype())
        assert array_digests.text_digest_rows(f["tags"], slab=64) == want
        assert array_digests.text_digest_rows(f["tags"][:0], slab=64) == hashlib.sha256(b"text\0[]").hexdigest()


PROJECT_TEST = '''
import json, os, tracemalloc
from pathlib import Path
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset
from pytest_trt.artifact import BuildResult
from pytest_trt.buildlog.record import BuildRecord

N = int(os.environ["STREAM_N"])
CONFIG = BuildConfig(name="cls", onnx="stand_in.onnx")


class Engine:
    """Outputs drawn from each sample's index: no array of N samples exists in the process."""

    def __init__(self, noisy):
        self.config, self.noisy = CONFIG, noisy
        self.result = BuildResult(backend="fake", engine=b"", log=(), config={}, effective_config={},
                                  config_hash=CONFIG.config_hash, onnx_sha256=CONFIG.onnx_sha256, durations={},
                                  versions={}, device={"kind": "cpu"}, backend_version="0")
        self.record = BuildRecord(source="fake")
        self.label, self.backend_name = CONFIG.name, "fake"

    def run(self, feeds):
        idx = feeds["idx"].astype(np.float32)
        k = np.arange(10, dtype=np.float32)
        out = np.sin(idx[:, None] * 0.37 + k[None, :] * 1.3) * 4
        if self.noisy:
            out += np.cos(idx[:, None] * 1.7 + k[None, :]) * 0.3
        return {"out": out.astype(np.float32)}


def test_check(trt_golden):
    update = bool(trt_golden.settings.update)
    kwargs = {}
    if update:
        rng = np.random.default_rng(1)
        kwargs = {"dataset": GoldenDataset.from_arrays({"idx": np.arange(N)}, labels=rng.integers(0, 10, N),
                                                       tags=[("edge" if i % 7 else "night") for i in range(N)]),
                  "classifier": True}
    else:
        kwargs = {"l2_delta": 10.0, "max_abs": 10.0, "cosine": 0.0, "top1_drop": 1.0, "drift_sd": 1e9}
    engine = Engine(noisy=not update)
    if not update:  # first check: imports, and the file's digest read in 32 MiB blocks on a thread (bounded)
        trt_golden.check(engine, batch_size=512, **kwargs)
    tracemalloc.start()
    result = trt_golden.check(engine, batch_size=512, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if not update:
        m = result.metrics["out"]
        Path(os.environ["STREAM_OUT"]).write_text(json.dumps({"peak": peak, "agreement": m.top1_agreement,
                                                              "tags": [t.count for t in m.tags]}))
'''


def test_check_memory_does_not_grow_with_samples(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stream=PROJECT_TEST)
    (pytester.path / "stand_in.onnx").write_bytes(b"stand-in: nothing builds it")
    peaks = {}
    for n in (20_000, 200_000):
        out = pytester.path / f"peak{n}.json"
        env = {"STREAM_N": str(n), "STREAM_OUT": str(out)}
        with pytest.MonkeyPatch.context() as mp:
            for k, v in env.items():
                mp.setenv(k, v)
            args = ("-p", "no:cacheprovider", f"--trt-golden-dir=golden{n}")
            pytester.runpytest_subprocess(*args, "--trt-update-golden", "--trt-approve", "memory").assert_outcomes(
                passed=1)
            pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
        result = json.loads(out.read_text())
        assert sum(result["tags"]) == n  # every sample was tallied under its tag ("edge" or "night")
        assert 0.0 < result["agreement"] < 1.0
        peaks[n] = result["peak"]
    growth = peaks[200_000] - peaks[20_000]
    assert growth < 2 << 20, f"check peak grew {growth / 2**20:.1f} MiB for 180,000 more samples ({peaks})"


def test_file_digest_and_block_digests_of_many_large_blocks_equal_hashlib(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_trt.golden import blocks

    monkeypatch.setattr(blocks, "BLOCK_BYTES", 1 << 16)  # hashlib lets go of the GIL: both digests run at once
    data = np.random.default_rng(1).integers(0, 256, 40 * (1 << 16) + 123, dtype=np.uint8).tobytes()
    (tmp_path / "f.h5").write_bytes(data)
    whole, logged = blocks.file_digests(tmp_path / "f.h5")
    assert whole == hashlib.sha256(data).hexdigest()
    assert logged["sha256"] == [hashlib.sha256(data[i : i + (1 << 16)]).hexdigest()
                                for i in range(0, len(data), 1 << 16)]


def test_file_block_digests_equal_hashlib_over_the_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_trt.golden import blocks

    monkeypatch.setattr(blocks, "BLOCK_BYTES", 1000)  # blocks of the file read into one reused buffer
    data = np.random.default_rng(0).integers(0, 256, 3500, dtype=np.uint8).tobytes()
    (tmp_path / "f.h5").write_bytes(data)
    whole, logged = blocks.file_digests(tmp_path / "f.h5")
    assert whole == hashlib.sha256(data).hexdigest()
    assert logged == {"size": 3500, "block": 1000,
                      "sha256": [hashlib.sha256(data[i : i + 1000]).hexdigest() for i in range(0, 3500, 1000)]}
