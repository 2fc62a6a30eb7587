"""The one terminal summary of pytest-trt: engines, bundles, the archive, golden refreshes and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.catalog.archiving import ArchiveOutcome
    from pytest_trt.pytest_plugin.channel import WorkerOutput

ENGINES = "pytest-trt engines"
BUNDLES = "pytest-trt audit bundles"


@dataclass(frozen=True)
class SummaryData:
    """What the summary prints: this process's output merged with its xdist workers', the archive, golden sections."""

    output: WorkerOutput
    archived: ArchiveOutcome | None = None
    golden: list[tuple[str, list[str]]] = field(default_factory=list)  # (section title, lines)


def write_summary(terminalreporter: Any, data: SummaryData) -> None:
    """Write every pytest-trt section ``data`` has."""
    write = terminalreporter.write_line
    own = data.output
    if own.engines:
        from pytest_trt.pytest_plugin.report import engine_table

        terminalreporter.section(ENGINES)
        for line in engine_table(own.engines):
            write(line)
    for error in own.cache_errors:
        write(f"WARNING {error}", yellow=True)
    if own.bundles or own.bundle_failures:
        from pytest_trt.pytest_plugin.audit import bundle_summary

        terminalreporter.section(BUNDLES)
        for line in bundle_summary(own.bundles, own.bundle_failures):
            write(line, **({"yellow": True} if line.startswith("WARNING ") else {}))
    if data.archived is not None:
        from pytest_trt.pytest_plugin.archive import SECTION

        terminalreporter.section(SECTION)
        for line in data.archived.lines:
            write(line)
        for line in data.archived.warnings:
            write(f"WARNING {line}", yellow=True)
    for title, lines in data.golden:
        terminalreporter.section(title)
        for line in lines:
            write(line)
