"""Writes the upgrade example's Q/DQ INT8 model (ONNX Runtime quantize_static, seeded) before collection."""

from __future__ import annotations

from pathlib import Path

from examples.conftest import MODELS
from examples.upgrade.models import write_qdq

QDQ = write_qdq(Path(__file__).parents[1] / "models")
FP32 = MODELS["mobilenet_v2"]
