"""``pytest-trt``: verify, show and diff audit bundles; parse build logs; show goldens.

Commands::

    pytest-trt bundle verify PATH... [--public-key KEY]
    pytest-trt bundle show PATH
    pytest-trt bundle diff OLD NEW [--mask-tactics]
    pytest-trt log parse BUILD.LOG [--onnx MODEL]
    pytest-trt log diff OLD.log NEW.log [--onnx MODEL] [--tactics]
    pytest-trt upgrade-report OLD NEW [-o report.html]
    pytest-trt golden show FILE
    pytest-trt golden approve GOLDEN --reason TEXT [--config NAME] [--key KEY] [--approvers FILE]
    pytest-trt golden log verify [DIR] [--approvers FILE] [--require-signed]
    pytest-trt golden tolerance PINS.toml CONFIG --golden FILE [--backend B] [--runs N] [--rebuilds N] [--margin X]
    pytest-trt onnx nodes MODEL [--op OP]
    pytest-trt calib show CACHE | calib diff OLD NEW  (see pytest_trt.calibration.cli)
    pytest-trt calib errors|search PINS.toml CONFIG --golden FILE  (see pytest_trt.sensitivity.cli)
    pytest-trt catalog add|query|show|history|push|prune ...  (see pytest_trt.catalog.cli)
    pytest-trt attest verify BUNDLE... [--public-key KEY]  (see pytest_trt.audit.attest_cli)
    pytest-trt monitor spec|rules|check ...  (see pytest_trt.monitor.cli)

Every command takes ``--json`` (one JSON document on stdout).

Exit codes (with several paths, the highest applies):

    0  success: verified, shown, parsed; ``diff`` found no differences
    1  a bundle failed verification, or ``diff`` found differences
    2  usage error (bad arguments)
    3  a file cannot be used: missing, unreadable, not a log, bad key file

User errors print one line to stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_trt.common.pipesafe import PipeSafe
from pytest_trt.errors import CommandInputError
from pytest_trt.golden.cli import emit as _emit
from pytest_trt.golden.cli import register_golden
from pytest_trt.upgrade import cli as upgrade_cli

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_FILE = 3




def _verify(path: Path, public_key: Path | None) -> Any:
    """verify_bundle, with file problems turned into :class:`CommandInputError`."""
    from pytest_trt.audit.verify import verify_bundle
    from pytest_trt.errors import KeyFileError, SigningUnavailable

    try:
        return verify_bundle(path, public_key=public_key)
    except FileNotFoundError:
        raise CommandInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        from pytest_trt.audit import bundles_in

        raise CommandInputError(f"{path}: is a directory, not a bundle: name its bundles, e.g. "
                                f"{bundles_in(path)}") from None
    except PermissionError:
        raise CommandInputError(f"{path}: permission denied") from None
    except (KeyFileError, SigningUnavailable) as exc:
        raise CommandInputError(str(exc)) from None


def cmd_bundle_verify(args: argparse.Namespace) -> int:
    from pytest_trt.errors import BundleIntegrityError

    code, results, lines = EXIT_OK, [], []
    for path in args.paths:
        row: dict[str, Any] = {"path": str(path), "ok": False, "error": None, "member": None}
        try:
            vb = _verify(path, args.public_key)
        except BundleIntegrityError as exc:
            row.update(error=exc.message, member=exc.context.get("member"))
            lines.append(f"FAILED  {exc.message}")
            code = max(code, EXIT_FAILED)
        except CommandInputError as exc:
            row["error"] = str(exc)
            lines.append(f"ERROR   {exc}")
            code = max(code, EXIT_FILE)
        else:
            sig = ("signature checked, key sha256:" + vb.signer[:16] if vb.signer
                   else "signed, signature not checked (give --public-key)" if vb.signed else "unsigned")
            row.update(ok=True, sha256=vb.sha256, members=sorted(vb.member_sha256), signed=vb.signed, signer=vb.signer)
            lines.append(f"OK      {path}  sha256 {vb.sha256}  {len(vb.member_sha256)} members, {sig}")
        results.append(row)
    _emit(args, {"results": results, "exit_code": code}, lines)
    return code


def _show_lines(vb: Any, summary: dict[str, Any] | None) -> list[str]:
    from pytest_trt.buildlog.summary import render_record_summary

    build, conf, env = vb.build["build"], vb.config, vb.environment
    pinned = conf["pinned"]
    # the verifier checked every key's type; optional keys may be absent or null
    versions = ", ".join(f"{k} {v}" for k, v in sorted((build.get("versions") or {}).items()))
    device = build.get("device") or {}
    gpus = ", ".join(str(g.get("name", "?")) for g in env.get("gpus") or [])
    gpus = gpus or f"none (cpu: {(env.get('cpu') or {}).get('model')})"
    os_name = (env.get("os") or {}).get("distribution") or (env.get("os") or {}).get("system")
    git = env.get("git") or {}
    engine = (f"included, {vb.engine_size:,} bytes" if vb.engine_size is not None else "hash only")
    lines = [
        f"bundle: {vb.path}",
        f"sha256: {vb.sha256}",
        f"config: {pinned.get('name')} v{pinned.get('version')}  precision {pinned.get('precision')}  "
        f"hash {conf['config_hash'][:16]}  onnx sha256 {str(conf.get('onnx_sha256'))[:16]}",
        f"backend: {build.get('backend')} ({versions})",
        f"device: {json.dumps(device, sort_keys=True)}",
        f"engine: {engine}, sha256 {build.get('engine_sha256')}",
        f"environment: python {(env.get('python') or {}).get('version')}, {os_name}, "
        f"gpus {gpus}, git {git.get('commit') or 'none'}{' (dirty)' if git.get('dirty') else ''}",
    ]
    lines.append(calibration_line(build.get("extra") or {}, pinned.get("calibration")))
    if summary is not None:
        lines += render_record_summary(summary)
    else:
        lines.append("record: none in this bundle")
    golden = vb.golden or {}
    lines.append(f"golden: {len(golden)} check(s)" if golden else "golden: not checked")
    lines += [f"  {test}: {v.get('verdict', '?')}" for test, v in sorted(golden.items())]
    lines.append("members: " + ", ".join(sorted(vb.member_sha256)))
    return lines


def calibration_line(extra: dict[str, Any], pinned: Any) -> str:
    """``bundle show``'s calibration line: algorithm, mode, quantizer, the digests, ranges and nodes left in float."""
    calib = extra.get("calibration")
    if not isinstance(calib, dict):
        return "calibration: none" if not pinned else f"calibration: pinned ({json.dumps(pinned, sort_keys=True)}), " \
                                                        "no calibration recorded by the build"

    def short(key: str) -> str:
        value = calib.get(key)
        return f"{str(value)[:8]}…" if value else "none"

    ranges = calib.get("ranges")
    count = len(ranges) if isinstance(ranges, (dict, list)) else ranges
    excluded = calib.get("exclude_nodes") or []
    return (f"calibration: {calib.get('algorithm', '?')} ({calib.get('mode', '?')}; {calib.get('quantizer') or '-'}); "
            f"data sha256 {short('data_sha256')}, cache {short('cache_sha256')}, Q/DQ {short('qdq_model_sha256')}; "
            f"{count if count is not None else '?'} tensors; exclude_nodes {', '.join(map(str, excluded)) or 'none'}")


def cmd_bundle_show(args: argparse.Namespace) -> int:
    from pytest_trt.buildlog.summary import record_summary

    vb = _verify(args.path, None)
    record = vb.record()
    summary = record_summary(record) if record is not None else None
    build = {k: v for k, v in vb.build["build"].items() if k != "log_index"}
    doc = {
        "path": str(vb.path), "sha256": vb.sha256, "config": vb.config, "build": build,
        "environment": vb.environment, "record_summary": summary, "golden": vb.golden,
        "members": dict(vb.member_sha256), "signed": vb.signed,
    }
    _emit(args, doc, _show_lines(vb, summary))
    return EXIT_OK


def cmd_bundle_diff(args: argparse.Namespace) -> int:
    from pytest_trt.audit.bundle_diff import diff_bundles

    old, new = _verify(args.old, None), _verify(args.new, None)
    diff = diff_bundles(old, new, mask_tactics=args.mask_tactics)
    _emit(args, diff.to_dict(), [diff.render()])
    return EXIT_OK if diff.is_empty else EXIT_FAILED


def _read_log_input(log: Path, onnx_path: Path | None) -> Any:
    """The record of a build log given to ``log parse`` or ``log diff``, or CommandInputError saying why there is none.

    Refused: a folder, a missing file, what is not a text log (empty, binary, compressed, an archive), a log with
    no TensorRT line, an unreadable or empty ONNX model.
    """
    from pytest_trt.buildlog.sniff import check_log_file
    from pytest_trt.buildlog.summary import read_log_record
    from pytest_trt.errors import TrtError

    for p, what in ((log, "a build log"), (onnx_path, "an ONNX model")):
        if p is not None and p.is_dir():
            raise CommandInputError(f"{p}: is a directory, not {what}")
        if p is not None and not p.is_file():
            raise CommandInputError(f"{p}: no such file")
    onnx = None
    try:
        check_log_file(log)
        if onnx_path is not None:
            from pytest_trt.buildlog.names import OnnxIndex

            onnx = OnnxIndex.load(onnx_path)
        record = read_log_record(log, onnx=onnx)
    except TrtError as exc:
        raise CommandInputError(exc.message) from None
    except (OSError, ValueError) as exc:
        raise CommandInputError(f"{log}: cannot be read as a TensorRT build log ({exc})") from None
    if _nothing_understood(record):
        raise CommandInputError(
            f"{log}: not a TensorRT build log: none of its {record.total_lines} lines is TensorRT output "
            "(no layers, messages, fusions, layer counts or versions); give the VERBOSE log of a build"
        )
    return record


def cmd_log_parse(args: argparse.Namespace) -> int:
    from pytest_trt.buildlog.summary import record_summary, render_record_summary

    record = _read_log_input(args.log, args.onnx)
    summary = record_summary(record)
    if not summary["backend"]:
        summary.update(_backend_beside(args.log))
    lines = [f"log: {args.log}", *render_record_summary(summary)]
    lines += [f"  fused: {layer.name} <- {', '.join(layer.origins)}" for layer in record.fusions[:20]]
    if len(record.fusions) > 20:
        lines.append(f"  ... {len(record.fusions) - 20} more fusions (use --json for all)")
    _emit(args, {"log": str(args.log), "summary": summary, "record": record.to_dict()}, lines)
    return EXIT_OK


def _checked_log_diff(args: argparse.Namespace) -> int:
    """``log diff``: both logs pass ``log parse``'s input checks, and the records they give are compared."""
    old, new = (_read_log_input(log, args.onnx) for log in (args.old, args.new))
    return upgrade_cli.cmd_log_diff(args, records=(old, new))


def _backend_beside(log: Any) -> dict[str, str]:
    """Backend and version from the ``build.json`` of the cache entry holding ``log`` ({} when there is none).

    A TensorRT-RTX log does not name the library's version; its cache entry does.
    """
    from pytest_trt.artifact import BUILD_FILE

    meta = log.parent / BUILD_FILE
    try:
        build = json.loads(meta.read_text(encoding="utf-8"))
        backend, version = str(build["backend"]), str(build.get("backend_version") or "")
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {"backend": backend, "backend_version": version, "backend_from": str(meta)}


def _nothing_understood(record: Any) -> bool:
    return not (record.layers or record.messages or record.fusion_events or record.layer_counts
                or record.backend_version or record.tool or record.calibration or record.bindings
                or record.removed_layers or record.timings or any(vars(record.memory).values()))


def cmd_onnx_nodes(args: argparse.Namespace) -> int:
    """The node names, op types and outputs of an ONNX model: the names the fusion assertions take."""
    from pytest_trt.buildlog.onnx_nodes import model_nodes

    model = args.model
    try:
        opsets, nodes = model_nodes(model)
    except ValueError as exc:
        raise CommandInputError(str(exc)) from None
    counts: dict[str, int] = {}
    for row in nodes:
        counts[row["op_type"]] = counts.get(row["op_type"], 0) + 1
    wanted = {op.lower() for op in args.op or ()}
    shown = [row for row in nodes if not wanted or row["op_type"].lower() in wanted]
    unnamed = sum(1 for row in shown if not row["name"])
    doc = {"model": str(model), "opsets": opsets, "nodes": shown, "op_types": dict(sorted(counts.items())),
           "total_nodes": len(nodes), "unnamed": unnamed}
    what = f"{len(shown)} of {len(nodes)} nodes ({', '.join(args.op)})" if wanted else f"{len(nodes)} nodes"
    lines = [f"model: {model}  opset {opsets.get('ai.onnx', '?')}, {what}"]
    if not shown:
        lines.append(f"no node has op type {', '.join(args.op)}; op types here: "
                     + ", ".join(f"{op} ({n})" for op, n in sorted(counts.items())))
        _emit(args, doc, lines)
        return EXIT_FAILED
    table = [("name", "op", "outputs")] + [
        (row["name"] or "(unnamed)",
         row["op_type"] if row["domain"] == "ai.onnx" else f"{row['domain']}:{row['op_type']}",
         ", ".join(row["outputs"]) + (f"  (in {row['parent']})" if row["parent"] else "")) for row in shown]
    widths = [max(len(r[i]) for r in table) for i in range(2)]
    lines += [f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]}".rstrip() for r in table]
    lines.append("assert_fused / assert_no_fusion take these names exactly, as a glob ('block1/*') or as 're:REGEX'")
    if unnamed:
        lines.append(f"{unnamed} node(s) have no name in this model, so no assertion can name them: give them names "
                     "in the export")
    _emit(args, doc, lines)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser = argparse.ArgumentParser(
        prog="pytest-trt", description="Audit bundles, build logs and golden files of pytest-trt.",
        epilog="exit codes: 0 ok; 1 verification failed or differences found; 2 usage error; 3 file error",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    groups = parser.add_subparsers(dest="group", required=True,
                                   metavar="{bundle,log,golden,onnx,calib,upgrade-report,catalog,monitor,attest}")
    bundle = groups.add_parser("bundle", help="verify, show and diff audit bundles").add_subparsers(
        dest="command", required=True, metavar="{verify,show,diff}")
    p = bundle.add_parser("verify", parents=[common], help="check manifest hashes, schema, member safety, signature")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--public-key", type=Path, metavar="KEY",
                   help="Ed25519 or ECDSA P-256 public key; the bundle must be signed by it")
    p.set_defaults(func=cmd_bundle_verify)
    p = bundle.add_parser("show", parents=[common], help="config, environment and build record summary")
    p.add_argument("path", type=Path, metavar="PATH")
    p.set_defaults(func=cmd_bundle_show)
    p = bundle.add_parser("diff", parents=[common], help="what changed between two bundles (exit 1 when anything did)")
    p.add_argument("old", type=Path, metavar="OLD")
    p.add_argument("new", type=Path, metavar="NEW")
    p.add_argument("--mask-tactics", action="store_true", help="do not report tactic changes")
    p.set_defaults(func=cmd_bundle_diff)
    log = groups.add_parser("log", help="read TensorRT build logs").add_subparsers(
        dest="command", required=True, metavar="{parse,diff}")
    p = log.add_parser("parse", parents=[common], help="BuildRecord summary of a verbose build log (also trtexec)")
    p.add_argument("log", type=Path, metavar="BUILD.LOG")
    p.add_argument("--onnx", type=Path, metavar="MODEL", help="the ONNX model, for exact node origins")
    p.set_defaults(func=cmd_log_parse)
    upgrade_cli.register_log_diff(log, common)
    log.choices["diff"].set_defaults(func=_checked_log_diff)
    register_golden(groups, common)
    onnx_group = groups.add_parser("onnx", help="read ONNX models").add_subparsers(
        dest="command", required=True, metavar="{nodes}")
    p = onnx_group.add_parser("nodes", parents=[common],
                              help="node names, op types and outputs: the names assert_fused and assert_no_fusion "
                                   "take (exit 1 when --op matches no node)")
    p.add_argument("model", type=Path, metavar="MODEL")
    p.add_argument("--op", action="append", metavar="OP", help="only nodes of this op type (repeatable), e.g. Conv")
    p.set_defaults(func=cmd_onnx_nodes)
    from pytest_trt.calibration.cli import add_calib_commands

    calib = add_calib_commands(groups, common)
    from pytest_trt.sensitivity.cli import add_sensitivity_commands

    add_sensitivity_commands(calib, common)
    upgrade_cli.register_upgrade(groups, common)
    from pytest_trt.catalog.cli import add_catalog_commands

    add_catalog_commands(groups, common)
    from pytest_trt.monitor.cli import add_monitor_commands

    add_monitor_commands(groups, common)
    from pytest_trt.audit.attest_cli import add_attest_commands

    add_attest_commands(groups, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (argparse exits 2 itself on usage errors)."""
    from pytest_trt.errors import BundleIntegrityError

    args = build_parser().parse_args(argv)
    out = PipeSafe(sys.stdout)
    sys.stdout = out
    try:
        code = int(args.func(args))
        out.flush()
        return code
    except BundleIntegrityError as exc:
        print(f"pytest-trt: verification failed: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    except CommandInputError as exc:
        print(f"pytest-trt: {exc}", file=sys.stderr)
        return EXIT_FILE
    finally:
        sys.stdout = out.stream


if __name__ == "__main__":
    sys.exit(main())
