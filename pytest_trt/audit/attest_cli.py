"""``pytest-trt attest``: check the attestations beside audit bundles.

Commands::

    pytest-trt attest verify BUNDLE... [--public-key KEY] [--json]

One line per check (``ok`` or ``FAIL`` and why).  Exit codes: 0 every check
passed; 1 a check failed; 2 usage error; 3 no attestations beside a bundle, a bad
key file, or the 'attest' extra is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_FILE = 0, 1, 3


def cmd_attest_verify(args: argparse.Namespace) -> int:
    from pytest_trt.audit.attest import INSTALL_HINT
    from pytest_trt.audit.attest_verify import AttestationMissing, verify_attestations

    code, docs, lines = EXIT_OK, [], []
    for bundle in args.bundles:
        try:
            report = verify_attestations(bundle, public_key=args.public_key)
        except AttestationMissing as exc:
            print(f"pytest-trt: {exc}", file=sys.stderr)
            docs.append({"bundle": str(bundle), "ok": False, "error": str(exc)})
            code = max(code, EXIT_FILE)
            continue
        except ImportError as exc:
            print(f"pytest-trt: {INSTALL_HINT} ({exc})", file=sys.stderr)
            return EXIT_FILE
        except (OSError, ValueError) as exc:  # an unreadable bundle or key file
            print(f"pytest-trt: {exc}", file=sys.stderr)
            docs.append({"bundle": str(bundle), "ok": False, "error": str(exc)})
            code = max(code, EXIT_FILE)
            continue
        lines.append(f"{bundle}: {'OK' if report.ok else 'FAILED'} "
                     f"({len(report.checks) - len(report.failures)} of {len(report.checks)} checks passed)")
        lines += [f"  {'ok  ' if c.ok else 'FAIL'}  {c.name}: {c.text}" for c in report.checks]
        docs.append({"bundle": str(bundle), "ok": report.ok,
                     "checks": [{"name": c.name, "ok": c.ok, "text": c.text} for c in report.checks]})
        if not report.ok:
            code = max(code, EXIT_FAILED)
    if args.json:
        print(json.dumps({"results": docs, "exit_code": code}, indent=2, sort_keys=True))
    else:
        for line in lines:
            print(line)
    return code


def add_attest_commands(groups: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pytest-trt attest`` on the CLI's command groups."""
    attest = groups.add_parser("attest", help="check in-toto attestations and ML-BOMs beside bundles").add_subparsers(
        dest="command", required=True, metavar="{verify}")
    p = attest.add_parser("verify", parents=[common],
                          help="DSSE signature (securesystemslib), in-toto statements, CycloneDX 1.6 BOM, and that "
                               "they describe the bundle (exit 1 on any failure)")
    p.add_argument("bundles", nargs="+", type=Path, metavar="BUNDLE")
    p.add_argument("--public-key", type=Path, metavar="KEY",
                   help="Ed25519 or ECDSA P-256 public key (PEM or OpenSSH); the attestations must be signed by it")
    p.set_defaults(func=cmd_attest_verify)
