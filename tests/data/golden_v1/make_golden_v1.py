"""How ``legacy-v1.h5`` was written (kept for the record; do not rerun on purpose).

Written at commit 8dc4855 (with the earlier HDF5 filters: inputs
gzip-4 + shuffle, outputs lzf) through the approved update path, two
generations, so the file also has a history group and two approvals.  The
test ``tests/golden/test_golden_legacy.py`` checks that today's code still
reads it, compares against it and refreshes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytest_trt.config import BuildConfig
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

SAMPLES, CLASSES, FEATURES = 64, 10, 6


def data() -> tuple[GoldenDataset, dict[str, np.ndarray]]:
    rng = np.random.default_rng(2026)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, SAMPLES)
    tags = tuple("edge" if i % 8 == 0 else "" for i in range(SAMPLES))
    logits = (rng.standard_normal((SAMPLES, CLASSES)) * 3).astype(np.float32)
    logits[np.arange(SAMPLES), labels] += 4.0  # a classifier that is mostly right
    feat = rng.standard_normal((SAMPLES, 4, 3)).astype(np.float32)
    return GoldenDataset.from_arrays({"x": x}, labels=labels, tags=tags), {"logits": logits, "feat": feat}


def main(folder: Path) -> None:
    dataset, outputs = data()
    config = BuildConfig(name="legacy", onnx=folder / "legacy.onnx")
    settings = GoldenSettings(golden_dir=folder, update=True, approve="legacy fixture generation 1")
    GoldenCheck(settings, config_provider=lambda: config).check(
        {k: v * 0.5 for k, v in outputs.items()}, dataset=dataset, classifier=["logits"])
    settings = GoldenSettings(golden_dir=folder, update=True, approve="legacy fixture generation 2")
    GoldenCheck(settings, config_provider=lambda: config).check(outputs, dataset=dataset, classifier=["logits"])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
