"""``pytest-trt calib show CACHE`` and ``pytest-trt calib diff OLD NEW``: calibration caches on the command line.

Registered by :func:`pytest_trt.cli.build_parser`; exit codes as the rest of the CLI (0 ok, 1 differences,
3 a file that is missing or not a calibration cache).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_DIFFERENT, EXIT_FILE = 0, 1, 3


def tolerance(text: str) -> float:
    """An argparse type: a finite number >= 0."""
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a tolerance: give a number of 0 or more (e.g. 0.01)")
    return value


def add_calib_commands(groups: Any, common: argparse.ArgumentParser) -> Any:
    """Add the ``calib`` group to the CLI's subparsers; return its subparsers (``errors`` and ``search`` join it)."""
    calib = groups.add_parser("calib", help="calibration caches; per-tensor INT8 error and the sensitivity search"
                              ).add_subparsers(dest="command", required=True, metavar="{show,diff,errors,search}")
    p = calib.add_parser("show", parents=[common], help="header, TensorRT version, algorithm and scales of a cache")
    p.add_argument("cache", type=Path, metavar="CACHE")
    p.set_defaults(func=cmd_calib_show)
    p = calib.add_parser("diff", parents=[common], help="per-tensor scale ratios, tensors added or missing, "
                         "algorithm and version changes (exit 1 when anything differs)")
    p.add_argument("old", type=Path, metavar="OLD")
    p.add_argument("new", type=Path, metavar="NEW")
    p.add_argument("--rtol", type=tolerance, default=0.0, help="ignore scale ratios within 1 +- RTOL (default 0)")
    p.set_defaults(func=cmd_calib_diff)
    return calib


def _read(path: Path) -> Any:
    from pytest_trt.buildlog.calibcache import read_calibration_cache
    from pytest_trt.errors import LogParseError

    if not path.is_file():
        raise SystemExit(_fail(f"{path}: no such file"))
    try:
        return read_calibration_cache(path, strict=True)
    except LogParseError as exc:
        raise SystemExit(_fail(exc.message)) from None


def _fail(message: str) -> int:
    print(f"pytest-trt: {message}", file=sys.stderr)
    return EXIT_FILE


def emit(args: argparse.Namespace, doc: dict[str, Any], lines: list[str]) -> None:
    """A ``calib`` command's output: the document with ``--json``, else the lines."""
    print(json.dumps(doc, indent=2, sort_keys=True) if args.json else "\n".join(lines))


def cmd_calib_show(args: argparse.Namespace) -> int:
    cache = _read(args.cache)
    scales = cache.scales
    doc = {"cache": str(args.cache), "header": cache.header, "trt_version": cache.trt_version,
           "calibrator": cache.calibrator, "tensors": len(scales), "scales": scales}
    lines = [f"cache: {args.cache}", f"header: {cache.header} (TensorRT {cache.trt_version}, {cache.calibrator})",
             f"tensors: {len(scales)}"]
    if scales:
        lines.append(f"scales: min {min(scales.values()):.6g}, max {max(scales.values()):.6g} (amax / 127)")
    emit(args, doc, lines)
    return EXIT_OK


def cmd_calib_diff(args: argparse.Namespace) -> int:
    from pytest_trt.buildlog.calibcache import compare_caches

    cmp = compare_caches(_read(args.old), _read(args.new))
    same = cmp.identical(rtol=args.rtol)
    doc = {"old": str(args.old), "new": str(args.new), "identical": same, "header_old": cmp.header_a,
           "header_new": cmp.header_b, "algorithm_changed": cmp.algorithm_changed,
           "version_changed": cmp.version_changed, "added": list(cmp.added), "missing": list(cmp.missing),
           "changed": cmp.changed(rtol=args.rtol)}
    emit(args, doc, [f"{args.old} -> {args.new}", cmp.describe(rtol=args.rtol)])
    return EXIT_OK if same else EXIT_DIFFERENT
