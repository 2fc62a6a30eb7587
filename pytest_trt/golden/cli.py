"""``pytest-trt golden``: show a golden file, co-sign its current generation, verify the approval log, measure a
config's noise.  Registered by :func:`pytest_trt.cli.build_parser`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_trt.errors import CommandInputError

EXIT_OK, EXIT_FAILED = 0, 1
#: the allowed-signers file the golden commands look for when --approvers is not given
APPROVERS_DEFAULT = "approvers.allowed_signers"


def emit(args: argparse.Namespace, doc: Any, lines: Sequence[str]) -> None:
    """A command's output: the document with ``--json``, else the lines."""
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True, default=str))
    else:
        for line in lines:
            print(line)


def cmd_golden_show(args: argparse.Namespace) -> int:
    from pytest_trt.errors import TrtError

    if not args.file.is_file():
        raise CommandInputError(f"{args.file}: no such file")
    from pytest_trt.golden.show import golden_show, golden_show_json

    try:
        data = golden_show_json(args.file) if args.json else None
        text = None if args.json else golden_show(args.file)
    except (TrtError, OSError) as exc:
        raise CommandInputError(f"{args.file}: {exc}") from None
    emit(args, data or {}, [(text or "").rstrip("\n")])
    return EXIT_OK


def _approvers(given: Path | None, where: Path, *, needed: bool) -> Path | None:
    """The allowed-signers file: ``--approvers``, else :data:`APPROVERS_DEFAULT` in ``where`` or the current folder."""
    if given is not None:
        if not given.is_file():
            raise CommandInputError(f"{given}: no such allowed-signers file")
        return given
    for folder in (where, Path.cwd()):
        if (folder / APPROVERS_DEFAULT).is_file():
            return folder / APPROVERS_DEFAULT
    if needed:
        raise CommandInputError(f"no allowed-signers file: pass --approvers FILE (the ini trt_approvers file, e.g. "
                                f"{APPROVERS_DEFAULT})")
    return None


def cmd_golden_approve(args: argparse.Namespace) -> int:
    """Co-sign the current generation of a golden file (two-person rule)."""
    from pytest_trt.errors import SigningUnavailable, TrtError
    from pytest_trt.golden import signing
    from pytest_trt.golden.approve import ApprovalRefused, cosign

    if not args.golden.is_file():
        raise CommandInputError(f"{args.golden}: no such golden file")
    allowed = _approvers(args.approvers, args.golden.parent, needed=True)
    assert allowed is not None
    key = signing.approval_key(args.key, args.golden.parent)
    if key is None:
        raise CommandInputError("no approval key: pass --key ~/.ssh/id_ed25519 (or set git config user.signingkey)")
    try:
        done = cosign(args.golden, args.config, args.reason, key, allowed, required=args.required, tty=True)
    except ApprovalRefused as exc:
        print(f"pytest-trt: not approved: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (TrtError, SigningUnavailable) as exc:
        raise CommandInputError(f"{args.golden}: {getattr(exc, 'message', exc)}") from None
    after = done.after
    doc = {"golden": str(args.golden), "signer": done.signer.principal, "key": done.signer.fingerprint,
           "line": done.line, "counted": after.counted, "required": after.required, "ignored": after.ignored}
    lines = [f"co-signed {args.golden} by {done.signer.principal} ({done.signer.fingerprint}): APPROVALS.jsonl "
             f"line {done.line}",
             f"signers counted: {len(after.counted)}/{after.required} ({', '.join(after.counted)})"]
    lines += [f"  not counted: {why}" for why in after.ignored]
    emit(args, doc, lines)
    return EXIT_OK


def cmd_golden_tolerance(args: argparse.Namespace) -> int:
    """Measure a config's noise (engine vs its unoptimized reference, runs, rebuilds) on a golden's dataset."""
    from pytest_trt.config import BuildConfig
    from pytest_trt.errors import TrtError

    if args.runs < 1 or args.rebuilds < 0 or not args.margin > 0:
        raise CommandInputError("--runs must be at least 1, --rebuilds at least 0 and --margin above 0")
    for path, what in ((args.pins, "pin file"), (args.golden, "golden file")):
        if not path.is_file():
            raise CommandInputError(f"{path}: no such {what}")
    from pytest_trt.golden.noise import measure_config

    try:
        config = BuildConfig.from_toml(args.pins, args.config)
        measured = measure_config(config, args.backend, args.golden, runs=args.runs, rebuilds=args.rebuilds,
                                  margin=args.margin)
    except (TrtError, ValueError, OSError) as exc:
        raise CommandInputError(f"{args.config}: {exc}") from None
    doc = {"config": config.name, "backend": args.backend, "golden": str(args.golden), "runs": args.runs,
           "rebuilds": args.rebuilds, **measured.to_dict()}
    lines = [f"{config.name} on {args.backend}, golden {args.golden}: {args.runs} run(s), {args.rebuilds} "
             f"rebuild(s), {measured.seconds:.2f} s", *measured.lines(),
             'use them: check(..., tolerance="measured") after an approved update, or as check() keywords']
    emit(args, doc, lines)
    return EXIT_OK


def cmd_golden_log_verify(args: argparse.Namespace) -> int:
    """Check the hash chain and signatures of a golden folder's APPROVALS.jsonl."""
    from pytest_trt.golden.approve import verify_folder

    folder = args.folder
    if not folder.is_dir():
        raise CommandInputError(f"{folder}: no such golden folder")
    if not (folder / "APPROVALS.jsonl").is_file():
        raise CommandInputError(f"{folder}: holds no APPROVALS.jsonl")
    allowed = _approvers(args.approvers, folder, needed=args.require_signed)
    report = verify_folder(folder, allowed, require_signed=args.require_signed)
    lines = report.summary()
    if allowed is None:
        lines.append("signatures not checked: no allowed-signers file (--approvers FILE)")
    emit(args, report.to_dict(), lines)
    return EXIT_OK if report.ok else EXIT_FAILED


def register_golden(groups: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``golden`` command group."""
    golden = groups.add_parser("golden", help="inspect, co-sign, audit and measure golden files").add_subparsers(
        dest="command", required=True, metavar="{show,approve,log,tolerance}")
    p = golden.add_parser("show", parents=[common], help="datasets, snapshots, provenance and approvals")
    p.add_argument("file", type=Path, metavar="FILE")
    p.set_defaults(func=cmd_golden_show)
    p = golden.add_parser("approve", parents=[common],
                          help="co-sign the current generation of a golden with your SSH key (two-person rule)")
    p.add_argument("golden", type=Path, metavar="GOLDEN")
    p.add_argument("--reason", required=True, help="why you approve it (recorded and signed)")
    p.add_argument("--config", metavar="NAME", help="the config whose snapshot you approve (files holding several)")
    p.add_argument("--key", type=Path, metavar="KEY",
                   help="SSH private key, or the .pub of an agent key (default: git config user.signingkey)")
    p.add_argument("--approvers", type=Path, metavar="FILE",
                   help=f"allowed-signers file (default: {APPROVERS_DEFAULT} beside the golden or here)")
    p.add_argument("--required", type=int, default=2, metavar="N",
                   help="signers the project requires (ini trt_approvals_required; default 2), for the count shown")
    p.set_defaults(func=cmd_golden_approve)
    log_group = golden.add_parser("log", help="the approval log").add_subparsers(
        dest="log_command", required=True, metavar="{verify}")
    p = log_group.add_parser("verify", parents=[common],
                             help="check APPROVALS.jsonl: hash chain, signatures, each golden's chain head")
    p.add_argument("folder", type=Path, nargs="?", default=Path("golden"), metavar="DIR",
                   help="the golden folder (default: golden)")
    p.add_argument("--approvers", type=Path, metavar="FILE",
                   help=f"allowed-signers file the signatures are checked against (default: {APPROVERS_DEFAULT} "
                        "beside the log or here; without one, signatures are not checked)")
    p.add_argument("--require-signed", action="store_true", help="fail on unsigned lines after the chain's start")
    p.set_defaults(func=cmd_golden_log_verify)
    p = golden.add_parser("tolerance", parents=[common],
                          help="measured noise per output (engine vs its unoptimized ONNX Runtime reference, runs, "
                               "rebuilds) on a golden's dataset, and the thresholds it suggests")
    p.add_argument("pins", type=Path, metavar="PINS.toml", help="the TOML pin file ([configs.NAME] tables)")
    p.add_argument("config", metavar="CONFIG", help="the config's name in PINS.toml")
    p.add_argument("--golden", type=Path, required=True, metavar="golden/NAME.h5", help="whose dataset is run")
    p.add_argument("--backend", default="onnxruntime", metavar="B", help="the backend that builds and runs the "
                   "engine (default onnxruntime)")
    p.add_argument("--runs", type=int, default=1, metavar="N", help="runs of the engine compared (default 1)")
    p.add_argument("--rebuilds", type=int, default=0, metavar="N", help="further builds compared with the first "
                   "(default 0)")
    p.add_argument("--margin", type=float, default=3.0, metavar="X", help="suggested threshold = noise x X "
                   "(default 3)")
    p.set_defaults(func=cmd_golden_tolerance)
