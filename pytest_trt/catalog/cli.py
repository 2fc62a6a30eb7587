"""``pytest-trt catalog``: index bundles, query them, push them to MLflow, prune them.

Commands::

    pytest-trt catalog add DIR|BUNDLE... [--db PATH] [--public-key KEY]
    pytest-trt catalog query [--config NAME] [--backend-version 8.6.*] [--device A100]
                             [--calibration minmax] [--verdict regression] [--engine-sha256 SHA]
                             [--since 2026-03-01|30d] [--all] [--limit N]
    pytest-trt catalog show SHA
    pytest-trt catalog history CONFIG [--since WHEN]
    pytest-trt catalog push --uri URI [--register] [SHA...]
    pytest-trt catalog prune [--keep-last N] [--older-than DURATION] [--dry-run]

Exit codes: 0 ok; 1 a bundle was refused by verification, nothing matched
(``query``, ``show``, ``history``) or a push failed; 2 usage error; 3 a file
cannot be used (missing bundle or catalog, unusable database, bad key file).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pytest_trt import options as opt
from pytest_trt.catalog import DEFAULT_DB_NAME
from pytest_trt.errors import CommandUsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FILE = 0, 1, 2, 3
#: the catalog a pytest run with the default bundle folder writes (``--trt-catalog``)
DEFAULT_DB = Path(opt.DEFAULT_BUNDLE_DIR) / DEFAULT_DB_NAME


def _print_json(doc: Any) -> None:
    print(json.dumps(doc, indent=2, sort_keys=True, default=str))


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Catalog problems become one line on stderr and exit code 3, never a traceback."""

    def run(args: argparse.Namespace) -> int:
        from pytest_trt.errors import CatalogError

        try:
            return func(args)
        except CatalogError as exc:
            print(f"pytest-trt: {exc.message}", file=sys.stderr)
            return EXIT_FILE
        except CommandUsageError as exc:
            print(f"pytest-trt catalog: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return run


def _open(args: argparse.Namespace, *, create: bool = False, read_only: bool = False) -> Any:
    """The catalog of ``--db``; ``read_only`` for the commands that only read (nothing is written to the file)."""
    from pytest_trt.catalog.store import Catalog
    from pytest_trt.errors import CatalogError

    if not create and not args.db.is_file():
        raise CatalogError(f"{args.db}: no catalog here; index bundles first with "
                           f"'pytest-trt catalog add trt-bundles --db {args.db}'", path=str(args.db))
    return Catalog(args.db, read_only=read_only)


def row_count(text: str) -> int:
    """An argparse type: a whole number of rows, 1 or more (SQLite's LIMIT takes up to 2**63 - 1)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 2**63 - 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows: give a whole number of 1 or more")
    return value


def sha_prefix(text: str) -> str:
    """An argparse type: a sha256 or a prefix of it, 4 to 64 hexadecimal digits."""
    if not re.fullmatch(r"[0-9a-fA-F]{4,64}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a sha256 prefix: give 4 to 64 hexadecimal digits "
                                         "(e.g. the first 16 of sha256sum's output)")
    return text.lower()


@_guard
def cmd_add(args: argparse.Namespace) -> int:
    if args.public_key is not None and not args.public_key.is_file():
        print(f"pytest-trt: {args.public_key}: no such key file", file=sys.stderr)
        return EXIT_FILE
    with _open(args, create=True) as catalog:
        results = catalog.add_paths(args.paths, public_key=args.public_key)
    code = EXIT_OK
    lines = []
    for r in results:
        if r.status in ("added", "known"):
            lines.append(f"{r.status.upper():8}{r.path}  sha256 {r.sha256}")
        elif r.status == "refused":
            lines.append(f"REFUSED {r.path}: {r.reason}")
            code = max(code, EXIT_FAILED)
        else:
            lines.append(f"ERROR   {r.reason}")
            code = max(code, EXIT_FILE)
    if not results:
        lines.append(f"no bundles (*.tar.gz) found in {', '.join(map(str, args.paths))}")
        code = EXIT_FILE
    if args.json:
        _print_json({"db": str(args.db), "results": [vars(r) for r in results], "exit_code": code})
    else:
        counts = {s: sum(r.status == s for r in results) for s in ("added", "known", "refused", "error")}
        print("\n".join(lines))
        print(f"catalog {args.db}: {counts['added']} added, {counts['known']} already indexed, "
              f"{counts['refused']} refused, {counts['error']} unreadable")
    return code


def _filters(args: argparse.Namespace) -> Any:
    from pytest_trt.catalog.query import Filters, parse_since

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise CommandUsageError(str(exc)) from None
    return Filters(config=args.config, backend=args.backend, backend_version=args.backend_version,
                   device=args.device, calibration=args.calibration, verdict=args.verdict,
                   engine_sha256=args.engine_sha256, since=since, include_all=args.all, limit=args.limit)


@_guard
def cmd_query(args: argparse.Namespace) -> int:
    from pytest_trt.catalog.query import iter_query
    from pytest_trt.catalog.render import table

    filters = _filters(args)
    with _open(args, read_only=True) as catalog:
        rows = iter_query(catalog, filters)  # read as they are written out: one row held, not the catalog
        if args.json:
            return EXIT_OK if _print_bundles_json(str(args.db), rows) else EXIT_FAILED
        lines = table(rows)  # each row's cells only: the columns' widths need them all
    count = len(lines) - 1
    if not count:
        print(f"no bundle in {args.db} matches")
        return EXIT_FAILED
    print("\n".join(lines))
    print(f"{count} bundle{'s' if count != 1 else ''}")
    return EXIT_OK


def _print_bundles_json(db: str, rows: Iterator[dict[str, Any]]) -> int:
    """``{"bundles": [...], "db": ...}`` exactly as :func:`_print_json` prints it, written a row at a time; the number
    of rows. A nested value's indentation is relative to its row, so each row's own dump is indented by 4."""
    from pytest_trt.catalog.query import jsonable_row

    out = sys.stdout
    count = 0
    for row in rows:
        text = json.dumps(jsonable_row(row), indent=2, sort_keys=True, default=str).replace("\n", "\n    ")
        out.write(('{\n  "bundles": [\n    ' if count == 0 else ",\n    ") + text)
        count += 1
    out.write(('{\n  "bundles": [],\n' if count == 0 else "\n  ],\n") + f'  "db": {json.dumps(db)}\n}}\n')
    return count


@_guard
def cmd_show(args: argparse.Namespace) -> int:
    from pytest_trt.catalog.query import jsonable
    from pytest_trt.catalog.render import show_lines

    with _open(args, read_only=True) as catalog:
        rows = catalog.find(args.sha)
        details = [catalog.details(r["sha256"]) for r in rows]
    if args.json:
        _print_json({"db": str(args.db), "bundles": [{**row, **d} for row, d in zip(jsonable(rows), details,
                                                                                     strict=True)]})
    elif not rows:
        print(f"no bundle or engine sha256 in {args.db} starts with {args.sha}")
    else:
        blocks = ["\n".join(show_lines(r, d)) for r, d in zip(rows, details, strict=True)]
        print("\n\n".join(blocks))
    return EXIT_OK if rows else EXIT_FAILED


@_guard
def cmd_history(args: argparse.Namespace) -> int:
    from pytest_trt.catalog.query import history, jsonable, parse_since
    from pytest_trt.catalog.render import history_lines

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise CommandUsageError(str(exc)) from None
    with _open(args, read_only=True) as catalog:
        rows = history(catalog, args.config, include_all=args.all, since=since)
    if args.json:
        _print_json({"db": str(args.db), "config": args.config, "bundles": jsonable(rows)})
    elif rows:
        print(f"history of {args.config}: {len(rows)} bundle{'s' if len(rows) != 1 else ''}")
        print("\n".join(history_lines(rows)))
    else:
        print(f"no bundle of config {args.config!r} in {args.db}")
    return EXIT_OK if rows else EXIT_FAILED


@_guard
def cmd_push(args: argparse.Namespace) -> int:
    from pytest_trt.catalog.credentials import redact
    from pytest_trt.catalog.mlflow_push import push_row, unpushed
    from pytest_trt.errors import MlflowUnavailable

    shown = redact(args.uri)  # never printed with its user:password

    with _open(args) as catalog:
        if args.sha:
            rows = [r for s in args.sha for r in catalog.find(s)]
            if not rows:
                print(f"no bundle in {args.db} starts with {', '.join(args.sha)}", file=sys.stderr)
                return EXIT_FAILED
        else:
            rows = unpushed(catalog, args.uri, register=args.register)
        try:
            outcomes = [push_row(catalog, r, uri=args.uri, register=args.register) for r in rows]
        except MlflowUnavailable as exc:
            raise CommandUsageError(str(exc)) from None
    failed = [o for o in outcomes if not o.ok]
    if args.json:
        _print_json({"uri": shown, "results": [vars(o) for o in outcomes]})
    else:
        for o in outcomes:
            if o.ok:
                reg = f", model version {o.model_version}" if o.model_version else ""
                print(f"PUSHED  {o.path}  run {o.run_id} (experiment {o.experiment}){reg}")
            else:
                print(f"FAILED  {o.path}: {o.error}")
        print(f"{shown}: {len(outcomes) - len(failed)} pushed, {len(failed)} failed"
              + ("; run this command again when the server is reachable" if failed else ""))
    return EXIT_FAILED if failed else EXIT_OK


@_guard
def cmd_prune(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from pytest_trt.catalog.fields import iso_utc
    from pytest_trt.catalog.prune import apply_prune, candidates, plan_prune, references, render_plan
    from pytest_trt.catalog.query import parse_duration

    if args.keep_last is None and args.older_than is None:
        raise CommandUsageError("prune needs --keep-last N, --older-than DURATION or both "
                                "(nothing else is ever deleted)")
    if args.keep_last is not None and args.keep_last < 0:
        raise CommandUsageError(f"--keep-last {args.keep_last}: give 0 or more")
    try:
        older = parse_duration(args.older_than) if args.older_than else None
    except ValueError as exc:
        raise CommandUsageError(f"--older-than: {exc}") from None
    with _open(args) as catalog:
        plan = plan_prune(candidates(catalog), references(catalog), keep_last=args.keep_last, older_than=older,
                          now=datetime.now(timezone.utc))
        outcome = None if args.dry_run else apply_prune(catalog, plan, when=iso_utc(time.time()))
    if args.json:
        keep = [{"path": plan.bundles[sha].path, "sha256": sha, "why": list(why)} for sha, why in
                sorted(plan.keep.items(), key=lambda kv: plan.bundles[kv[0]].created)]
        _print_json({"db": str(args.db), "dry_run": args.dry_run, "keep": keep,
                     "delete": [{"path": c.path, "sha256": c.sha256} for c in plan.delete],
                     "deleted": None if outcome is None else [c.path for c in outcome.deleted],
                     "skipped": None if outcome is None else [{"path": c.path, "why": why}
                                                             for c, why in outcome.skipped]})
        return EXIT_OK
    for line in render_plan(plan, dry_run=args.dry_run):
        print(line)
    if outcome is None:
        print(f"dry run: {len(plan.delete)} bundle(s) would be deleted, {len(plan.keep)} kept")
        return EXIT_OK
    for c, why in outcome.skipped:
        print(f"SKIPPED {c.path}: {why}")
    print(f"deleted {len(outcome.deleted)} bundle(s), kept {len(plan.keep) + len(outcome.skipped)}")
    return EXIT_OK


def add_catalog_commands(groups: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pytest-trt catalog ...`` on the top-level subparsers ``groups``."""
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", type=Path, default=DEFAULT_DB, metavar="PATH",
                    help=f"catalog database (default: {DEFAULT_DB})")
    parents = [common, db]
    sub = groups.add_parser("catalog", help="index, query, push and prune audit bundles").add_subparsers(
        dest="command", required=True, metavar="{add,query,show,history,push,prune}")
    p = sub.add_parser("add", parents=parents, help="verify bundles and index them (folders: every *.tar.gz)")
    p.add_argument("paths", nargs="+", type=Path, metavar="DIR|BUNDLE")
    p.add_argument("--public-key", type=Path, metavar="KEY", help="bundles must be signed by this Ed25519 key")
    p.set_defaults(func=cmd_add)
    p = sub.add_parser("query", parents=parents, help="bundles matching every filter given")
    p.add_argument("--config", help="config name (glob allowed)")
    p.add_argument("--backend", help=" or ".join(c for c in opt.BACKEND_OPT.current_choices() if c != "auto"))
    p.add_argument("--backend-version", metavar="VERSION", help="e.g. 8.6.* or 8.6 (that version and below it)")
    p.add_argument("--device", help="text in the device name, any case (A100, H200, cpu)")
    p.add_argument("--calibration", metavar="ALGORITHM", help="INT8 calibration algorithm (minmax, entropy2, ...)")
    p.add_argument("--verdict", help="a golden verdict of the bundle (pass, regression, updated, tainted, ...)")
    p.add_argument("--engine-sha256", metavar="SHA", type=sha_prefix, help="engine sha256 or a prefix of it")
    p.add_argument("--since", metavar="WHEN", help="created since a date (2026-03-01) or a duration ago (30d)")
    p.add_argument("--all", action="store_true", help="include superseded and pruned bundles")
    p.add_argument("--limit", type=row_count, help="at most this many rows")
    p.set_defaults(func=cmd_query)
    p = sub.add_parser("show", parents=parents, help="one bundle by bundle or engine sha256 (prefix)")
    p.add_argument("sha", metavar="SHA", type=sha_prefix)
    p.set_defaults(func=cmd_show)
    p = sub.add_parser("history", parents=parents, help="versions, approvals and verdicts of a config over time")
    p.add_argument("config", metavar="CONFIG")
    p.add_argument("--since", metavar="WHEN", help="created since a date (2026-03-01) or a duration ago (30d)")
    p.add_argument("--all", action="store_true", help="include superseded and pruned bundles")
    p.set_defaults(func=cmd_history)
    p = sub.add_parser("push", parents=parents, help="log bundles to MLflow (default: those not pushed yet)")
    p.add_argument("sha", nargs="*", metavar="SHA", type=sha_prefix, help="only these bundles (sha256 prefixes)")
    # the settings of the plugin's --trt-mlflow-uri and --trt-mlflow-register, under the command's own names
    opt.add_argument(p, opt.MLFLOW_URI_OPT, "--uri", required=True, help="MLflow tracking URI (http://host:5000)")
    opt.add_argument(p, opt.MLFLOW_REGISTER_OPT, "--register", help="also register each engine as a model version")
    p.set_defaults(func=cmd_push)
    p = sub.add_parser("prune", parents=parents, help="delete old bundles nothing refers to")
    p.add_argument("--keep-last", type=int, metavar="N", help="always keep the N newest bundles of each config")
    p.add_argument("--older-than", metavar="DURATION", help="only delete bundles older than this (90d, 7y)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, delete nothing")
    p.set_defaults(func=cmd_prune)
