"""``pytest-trt calib errors`` and ``pytest-trt calib search``: an INT8 config's per-tensor error, and the nodes to
leave in float so that its golden passes again.

Registered into the ``calib`` group by :func:`pytest_trt.cli.build_parser`.  Exit codes as the rest of the CLI:
0 ok (errors shown; a passing set found), 1 the search found no passing set, 3 a file, config or golden that
cannot be used (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pytest_trt.calibration.cli import emit
from pytest_trt.errors import CommandInputError, TrtError

EXIT_OK, EXIT_NOT_FOUND = 0, 1
DEFAULT_BUDGET = 20
DEFAULT_BATCH = 8
SHOWN = 20


def add_sensitivity_commands(calib: Any, common: argparse.ArgumentParser) -> None:
    """Add ``errors`` and ``search`` to the ``calib`` subparsers."""
    def target(p: argparse.ArgumentParser) -> None:
        p.add_argument("pins", type=Path, metavar="PINS.toml", help="the TOML pin file ([configs.NAME] tables)")
        p.add_argument("config", metavar="CONFIG", help="the INT8 config's name in PINS.toml")
        p.add_argument("--golden", type=Path, required=True, metavar="golden/NAME.h5",
                       help="the golden file whose dataset is run (and, for search, whose snapshot judges)")

    p = calib.add_parser("errors", parents=[common], help="per-tensor quantization error (float vs Q/DQ model) on "
                         "a golden dataset, worst SQNR first, with the ONNX nodes; weights too")
    target(p)
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, metavar="N",
                   help=f"samples per batch (memory holds one batch's activations; default {DEFAULT_BATCH})")
    p.add_argument("--top", type=int, default=SHOWN, metavar="N", help=f"tensors shown as text (default {SHOWN})")
    p.set_defaults(func=cmd_calib_errors)

    from pytest_trt.sensitivity.search import STRATEGIES

    p = calib.add_parser("search", parents=[common], help="the ONNX nodes to leave in float "
                         "(Calibration.exclude_nodes) so the golden's thresholds pass; exit 1 when none is found")
    target(p)
    p.add_argument("--backend", default="onnxruntime", metavar="B",
                   help="onnxruntime (runs each candidate's engine) or tensorrt-rtx (builds each candidate; accuracy "
                        "from ONNX Runtime's run of the same Q/DQ model)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, metavar="N",
                   help=f"most candidates built and run (default {DEFAULT_BUDGET})")
    p.add_argument("--strategy", choices=STRATEGIES, default="greedy",
                   help="greedy: 1, 2, 3 ... worst nodes; bisect: shortest passing prefix by bisection")
    p.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE",
                   help="a golden threshold as check() takes it (top1_drop=0.02, l2_delta=none); repeatable")
    p.add_argument("--write-pin", type=Path, metavar="OUT.toml",
                   help="write the config with the exclude_nodes found, as a TOML pin")
    p.set_defaults(func=cmd_calib_search)


def _fail(message: str) -> CommandInputError:
    return CommandInputError(message)


def _load(args: argparse.Namespace) -> Any:
    from pytest_trt.config import BuildConfig

    if not args.pins.is_file():
        raise _fail(f"{args.pins}: no such pin file")
    if not args.golden.is_file():
        raise _fail(f"{args.golden}: no such golden file (approve the config's golden first: pytest ... "
                    "--trt-update-golden --trt-approve REASON)")
    try:
        config = BuildConfig.from_toml(args.pins, args.config)
    except TrtError as exc:
        raise _fail(str(exc)) from None
    calib = config.calibration
    if calib is None or not calib.explicit:
        raise _fail(f"{args.pins} [configs.{args.config}]: not an explicit INT8 config; give one with "
                    "[configs.NAME.calibration] algorithm = minmax, entropy, percentile or distribution")
    return config


def _qdq(config: Any) -> Any:
    from pytest_trt.calibration.explicit import calibrate_explicit

    try:
        return calibrate_explicit(config)
    except TrtError as exc:
        raise _fail(str(exc)) from None


def _measure(config: Any, golden: Path, batch: int) -> Any:
    from pytest_trt.golden.store import GoldenFile
    from pytest_trt.sensitivity.tensor_errors import batches_of, measure

    outcome = _qdq(config)
    try:
        with GoldenFile(golden) as g:
            if not g.has_dataset:
                raise _fail(f"{golden}: holds no golden dataset")
            return measure(config.onnx, outcome.qdq_model, batches_of(g.inputs(), g.samples, batch))
    except TrtError as exc:
        raise _fail(str(exc)) from None


def _db(v: float | None) -> str:
    if v is None:
        return "-"
    return "inf" if v == float("inf") else f"{v:.1f}"


def error_lines(errors: Any, top: int) -> list[str]:
    lines = [f"{errors.samples} samples in {errors.batches} batches, {errors.seconds:.2f} s; "
             f"own: the tensor's own rounding and clipping; accum: float model vs Q/DQ model",
             f"{'own dB':>7} {'accum dB':>8} {'rel L2':>8} {'clipped':>8}  kind        tensor  (producer -> readers)"]
    for t in errors.tensors[:top]:
        lines.append(f"{_db(t.sqnr_db):>7} {_db(t.accumulated_sqnr_db):>8} {t.rel_l2:8.4f} {t.clipped:8.2%}  "
                     f"{t.kind:<10}  {t.tensor}  ({t.producer or '-'} -> {', '.join(t.consumers) or 'output'})")
    if len(errors.tensors) > top:
        lines.append(f"... {len(errors.tensors) - top} more (--top N, or --json)")
    lines.append("nodes to leave in float first (worst own SQNR of the quantized tensors they read or write):")
    lines += [f"  {_db(s):>6} dB  {n}" for n, s in errors.ranked_nodes()[:5]]
    return lines


def cmd_calib_errors(args: argparse.Namespace) -> int:
    if args.batch < 1 or args.top < 0:
        raise _fail("--batch must be at least 1 and --top at least 0")
    config = _load(args)
    errors = _measure(config, args.golden, args.batch)
    doc = {"config": config.name, "pins": str(args.pins), "golden": str(args.golden), **errors.to_dict()}
    emit(args, doc, [f"{config.name}: {config.calibration.algorithm} INT8, Q/DQ model vs {config.onnx}",
                      *error_lines(errors, args.top)])
    return EXIT_OK


def _limits(raw: list[str]) -> Any:
    from pytest_trt.compare.thresholds import ThresholdSet, parse_ini_value, threshold_names

    changes: dict[str, Any] = {}
    for item in raw:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in threshold_names():
            raise _fail(f"--threshold {item!r}: expected NAME=VALUE with NAME one of {', '.join(threshold_names())}")
        try:
            changes[name] = parse_ini_value(name, text)
        except TrtError as exc:
            raise _fail(f"--threshold {item!r}: {exc}") from None
    return ThresholdSet().with_overrides(changes)


def cmd_calib_search(args: argparse.Namespace) -> int:
    from pytest_trt.backends.registry import names
    from pytest_trt.sensitivity.evaluate import Evaluator, check_snapshot
    from pytest_trt.sensitivity.search import FOUND, search

    if args.budget < 1:
        raise _fail("--budget must be at least 1")
    if args.backend not in names():
        raise _fail(f"--backend {args.backend!r}: choose one of {', '.join(names())}")
    limits = _limits(args.threshold)
    config = _load(args)
    try:
        check_snapshot(args.golden, config.name)
        evaluator = Evaluator(config, args.golden, limits, args.backend)
    except TrtError as exc:
        raise _fail(str(exc)) from None
    errors = _measure(config, args.golden, DEFAULT_BATCH)
    ranked = errors.ranked_nodes()
    say = (lambda _line: None) if args.json else print
    say(f"{config.name}: {config.calibration.algorithm} INT8 on {args.backend}, {len(ranked)} quantized nodes ranked "
        f"by own SQNR ({errors.seconds:.2f} s); {args.strategy}, budget {args.budget}")
    say(evaluator.accuracy_note)
    try:
        outcome = search(ranked, evaluator, budget=args.budget, strategy=args.strategy,
                         on_step=lambda s: say(s.line(ranked)))
    except TrtError as exc:
        raise _fail(f"{config.name}: a candidate failed: {exc}") from None
    lines = [_stop_line(outcome)]
    written = None
    if outcome.found is not None and args.write_pin is not None:
        comments = [f"{config.name}: {config.calibration.algorithm} INT8, exclude_nodes from calib search "
                    f"({args.strategy}, {args.backend}, golden {args.golden.name})",
                    *(s.line(ranked) for s in outcome.steps), _stop_line(outcome),
                    "review it; the golden still needs an approved update"]
        from pytest_trt.sensitivity.pin import write_pin

        try:
            written = write_pin(args.write_pin, args.pins, config.name, outcome.found, comments)
        except TrtError as exc:
            raise _fail(str(exc)) from None
        lines.append(f"wrote {args.write_pin}: [configs.{config.name}.calibration] exclude_nodes = "
                     f"{json.dumps(list(outcome.found))}")
    doc = {"config": config.name, "backend": args.backend, "accuracy_note": evaluator.accuracy_note,
           "errors_seconds": errors.seconds, **outcome.to_dict(),
           "pin": str(args.write_pin) if written is not None else None,
           "pin_config_hash": written.config_hash if written is not None else None}
    emit(args, doc, lines)
    sys.stdout.flush()
    return EXIT_OK if outcome.found is not None and outcome.stopped in (FOUND, "already passes", "budget") \
        else EXIT_NOT_FOUND


def _stop_line(outcome: Any) -> str:
    from pytest_trt.sensitivity.search import ALREADY_PASSES, BUDGET, FOUND, NO_EXCLUSION_HELPS

    tally = (f"{outcome.evaluations} candidates, {outcome.builds} builds, {outcome.runs} golden runs, "
             f"{outcome.seconds:.1f} s")
    if outcome.stopped == ALREADY_PASSES:
        return f"the config already passes the golden; nothing to exclude ({tally})"
    if outcome.stopped == FOUND:
        return f"found: exclude_nodes = {json.dumps(list(outcome.found))} ({tally})"
    if outcome.stopped == NO_EXCLUSION_HELPS:
        return (f"no exclusion helps: with all {len(outcome.ranked)} ranked nodes in float the golden still fails "
                f"({tally})")
    assert outcome.stopped == BUDGET
    if outcome.found is not None:
        return (f"budget of {outcome.budget} spent; shortest passing set seen: exclude_nodes = "
                f"{json.dumps(list(outcome.found))} ({tally})")
    return f"budget of {outcome.budget} spent with no passing set ({tally}); raise --budget"
