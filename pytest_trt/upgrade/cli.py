"""Command-line entry points of the upgrade review, registered by :func:`pytest_trt.cli.build_parser`.

    pytest-trt log diff OLD.log NEW.log [--onnx MODEL] [--tactics] [--json]
    pytest-trt upgrade-report OLD NEW [-o report.html] [--json] [--localize] [--allow-unchecked]

Exit codes follow :mod:`pytest_trt.cli`: 0 nothing changed (``upgrade-report``: no regression and
nothing unpaired or uncomparable), 1 differences (``upgrade-report``: a regression, a config that
could not be compared, a config whose outputs were not checked unless ``--allow-unchecked``, or an
unpaired bundle), 3 a file cannot be used.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pytest_trt.errors import CommandInputError

EXIT_OK, EXIT_FAILED, EXIT_FILE = 0, 1, 3


def _print(args: argparse.Namespace, doc: Any, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True, default=str))
    else:
        print("\n".join(lines))


def cmd_log_diff(args: argparse.Namespace, records: tuple[Any, Any] | None = None) -> int:
    """``log diff``; ``records``: both logs' records when the caller has read them already."""
    from pytest_trt.errors import TrtError
    from pytest_trt.upgrade.logdiff import diff_logs

    for p in (args.old, args.new, args.onnx):
        if p is not None and not p.is_file():
            raise CommandInputError(f"{p}: no such file")
    try:
        result = diff_logs(args.old, args.new, mask_tactics=not args.tactics, onnx=args.onnx, records=records)
    except (TrtError, OSError, UnicodeDecodeError, ValueError) as exc:
        raise CommandInputError(f"cannot read the logs as TensorRT build logs ({exc})") from None
    _print(args, result.to_dict(), result.lines())
    return EXIT_OK if result.diff.is_empty else EXIT_FAILED


#: the catalog ``upgrade-report`` reads verified facts from when no --db is given and this file exists
DEFAULT_DB = Path("trt-bundles") / "catalog.sqlite"


def _reader(args: argparse.Namespace) -> Any:
    from pytest_trt.audit.facts import FactsReader
    from pytest_trt.errors import CatalogError
    from pytest_trt.upgrade.pairing import catalog_lookup

    db = args.db if args.db is not None else (DEFAULT_DB if DEFAULT_DB.is_file() else None)
    lookup = None
    if db is not None and not args.reverify:
        try:
            lookup = catalog_lookup(db)
        except CatalogError as exc:
            if args.db is not None:
                raise CommandInputError(exc.message) from None
    return FactsReader(lookup=lookup, reverify=args.reverify)


def cmd_upgrade_report(args: argparse.Namespace) -> int:
    from pytest_trt.errors import PairingError
    from pytest_trt.upgrade.pairing import collector_paused
    from pytest_trt.upgrade.report import make_report, summary_lines, write_html

    reader = _reader(args)
    html, digest = None, None
    with collector_paused():  # every bundle's documents stay alive until the HTML is written
        try:
            report = make_report(args.old, args.new, mask_tactics=not args.tactics, localize=args.localize,
                                 allow_unchecked=args.allow_unchecked, quant_errors=not args.no_quant_errors,
                                 cache_dir=args.cache_dir, golden_dir=args.golden, reader=reader)
        except PairingError as exc:
            raise CommandInputError(str(exc)) from None
        if not args.no_html:
            html = Path(args.output)
            digest = write_html(report, html, tactics=args.tactics)
    read = {"from_verified_facts": reader.from_facts, "verified_now": reader.verified}
    if args.json:
        print(json.dumps({**report.to_dict(), "html": str(html) if html else None, "html_sha256": digest,
                          "bundles_read": read}, indent=2, sort_keys=True, default=str))
    else:
        print("\n".join(summary_lines(report, html=html, digest=digest)))
    return EXIT_OK if report.ok else EXIT_FAILED


def register_log_diff(log: Any, common: argparse.ArgumentParser) -> None:
    """Add ``diff`` to the ``log`` command group."""
    p = log.add_parser("diff", parents=[common], help="structure differences of two verbose build logs "
                       "(fusions, precisions, layers, memory, warnings; exit 1 when anything differs)")
    p.add_argument("old", type=Path, metavar="OLD.log")
    p.add_argument("new", type=Path, metavar="NEW.log")
    p.add_argument("--onnx", type=Path, metavar="MODEL", help="the ONNX model, for exact node origins")
    p.add_argument("--tactics", action="store_true", help="report tactic changes too (masked by default)")
    p.set_defaults(func=cmd_log_diff)


def register_upgrade(groups: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``upgrade-report`` command."""
    p = groups.add_parser("upgrade-report", parents=[common],
                          help="one HTML review of two runs of a suite (bundle folders or bundle files)")
    p.add_argument("old", metavar="OLD", help="the old run: a bundle folder, a bundle, or bundles joined by commas")
    p.add_argument("new", metavar="NEW", help="the new run, the same way")
    p.add_argument("-o", "--output", type=Path, default=Path("upgrade-report.html"), metavar="HTML",
                   help="where to write the self-contained HTML report (default upgrade-report.html)")
    p.add_argument("--no-html", action="store_true", help="print the summary (or --json) only")
    p.add_argument("--tactics", action="store_true", help="list tactic changes in the main view")
    p.add_argument("--localize", action="store_true",
                   help="for configs whose outputs regressed, find the first diverging ONNX node of the models the "
                        "engines were built from (the Q/DQ models of calibrated configs)")
    p.add_argument("--reverify", action="store_true",
                   help="verify every bundle completely (by default a bundle unchanged since it was verified, by "
                        "its sidecar or a catalog row, is read from those verified facts)")
    p.add_argument("--db", type=Path, metavar="CATALOG",
                   help=f"a catalog to read verified facts from (default {DEFAULT_DB} when it exists; read-only)")
    p.add_argument("--allow-unchecked", action="store_true",
                   help="a config whose outputs were not checked (no golden check ran) does not fail the review")
    p.add_argument("--no-quant-errors", action="store_true",
                   help="skip the per-tensor quantization errors of regressed INT8 configs")
    p.add_argument("--golden", type=Path, metavar="DIR", default=None,
                   help="folder of golden files, for when the path a bundle names is gone")
    p.add_argument("--cache-dir", type=Path, metavar="DIR", default=None,
                   help="the run's engine cache: stored Q/DQ models, for when they cannot be rebuilt here")
    p.set_defaults(func=cmd_upgrade_report)
