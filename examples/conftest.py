"""Writes the example ONNX models (generated with a fixed seed, never committed) before collection."""

from __future__ import annotations

from pathlib import Path

from examples.models import write_all

MODELS = write_all(Path(__file__).parent / "models")
