"""Cost of the noise measurement an approved update makes: MobileNetV2 224x224 on ONNX Runtime, 32 samples.

Times the product path (``GoldenCheck.check`` in update mode, a real ``Engine`` built by the ONNX Runtime backend)
with the measurement, and with it replaced by "not measured", side by side in one run::

    PYTHONPATH=. python benchmarks/bench_noise.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.models import write
from pytest_trt.backends.onnxruntime import OrtBackend
from pytest_trt.config import BuildConfig
from pytest_trt.engines.engine import Engine
from pytest_trt.golden import noise
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings

SAMPLES, ROUNDS = 32, 3


def approve(folder: Path, engine: Engine, dataset: GoldenDataset, i: int) -> float:
    settings = GoldenSettings(golden_dir=folder / f"g{i}", update=True, approve="bench", rootdir=folder)
    t0 = time.perf_counter()
    GoldenCheck(settings, nodeid="bench").check(engine, dataset=dataset)
    return time.perf_counter() - t0


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = BuildConfig(name="mnv2", onnx=write(folder / "mnv2.onnx"))
        backend = OrtBackend()
        engine = Engine(config, backend.build_config(config), backend)
        x = np.random.default_rng(0).standard_normal((SAMPLES, 3, 224, 224)).astype(np.float32)
        dataset = GoldenDataset.from_arrays({"input": x})
        real_tap = noise.tap
        with_noise, without = [], []
        for i in range(ROUNDS):
            noise.tap = real_tap
            with_noise.append(approve(folder, engine, dataset, 2 * i))
            noise.tap = lambda e, _d: (e, lambda: noise.not_measured("off"))  # type: ignore[assignment]
            without.append(approve(folder, engine, dataset, 2 * i + 1))
        noise.tap = real_tap
        a, b = min(with_noise), min(without)
        print(f"approval of {SAMPLES} samples, best of {ROUNDS}: with noise {a:.2f} s, without {b:.2f} s, "
              f"ratio {a / b:.2f}")


if __name__ == "__main__":
    main()
