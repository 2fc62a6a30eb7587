"""How ``today.h5`` was written (kept for the record; do not rerun on purpose).

Written by the code of the commit before per-dataset digests, the file digest sidecar and escaped
output names: two approved generations through the outputs-only update path, with an output named
``head/probs`` that that code stored as group ``head`` + dataset ``probs``.  The file has no
``today.h5.sha256`` sidecar and no per-dataset ``sha256`` attributes.  The test
``tests/golden/test_golden_integrity.py`` checks that today's code still reads, checks and
refreshes it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pytest_trt.config import BuildConfig
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

SAMPLES, CLASSES, FEATURES = 48, 4, 5


def data() -> tuple[GoldenDataset, dict[str, np.ndarray]]:
    rng = np.random.default_rng(31)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, SAMPLES)
    logits = (rng.standard_normal((SAMPLES, CLASSES)) * 2).astype(np.float32)
    logits[np.arange(SAMPLES), labels] += 4.0
    probs = rng.random((SAMPLES, 3)).astype(np.float32)
    return GoldenDataset.from_arrays({"x": x}, labels=labels), {"logits": logits, "head/probs": probs}


def main(folder: Path) -> None:
    dataset, outputs = data()
    config = BuildConfig(name="today", onnx=folder / "today.onnx")
    for generation, scale in ((1, 0.5), (2, 1.0)):
        settings = GoldenSettings(golden_dir=folder, update=True, approve=f"today fixture generation {generation}")
        GoldenCheck(settings, config_provider=lambda: config).check(
            {k: v * scale for k, v in outputs.items()}, dataset=dataset, classifier=["logits"])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
