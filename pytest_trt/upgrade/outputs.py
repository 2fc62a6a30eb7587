"""The compact output summary of a golden check: computed in :mod:`pytest_trt.compare.output_summary`, read here."""

from __future__ import annotations

from pytest_trt.compare.output_summary import (
    BINS,
    MAX_CONFUSION_CLASSES,
    SUMMARY_SCHEMA,
    summarize_output,
    summarize_outputs,
)

__all__ = ["BINS", "MAX_CONFUSION_CLASSES", "SUMMARY_SCHEMA", "summarize_output", "summarize_outputs"]
