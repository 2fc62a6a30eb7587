"""The one terminal summary of pytest-trt: engines, bundles, the archive, golden refreshes and notes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.pytest_plugin.session import TrtSession

ENGINES = "pytest-trt engines"
BUNDLES = "pytest-trt audit bundles"


def write_summary(terminalreporter: Any, session: TrtSession) -> None:
    """Write every pytest-trt section this process (and, on the xdist controller, its workers) has."""
    write = terminalreporter.write_line
    own = session.own_output()
    for worker in session.workers:
        own.merge(worker)
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
    if session.archived is not None:
        from pytest_trt.pytest_plugin.archive import SECTION

        terminalreporter.section(SECTION)
        for line in session.archived.lines:
            write(line)
        for line in session.archived.warnings:
            write(f"WARNING {line}", yellow=True)
    golden = session.golden_state  # None: no golden option, check or note in this run (nothing to say)
    for title, lines in golden.summary() if golden is not None else ():
        terminalreporter.section(title)
        for line in lines:
            write(line)
