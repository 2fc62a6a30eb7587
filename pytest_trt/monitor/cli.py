"""``pytest-trt monitor``: the gray-release monitor's spec from a golden, its Prometheus rules, offline checks.

Commands::

    pytest-trt monitor spec golden/NAME.h5 -o NAME.monitor.json [--config NAME] [--alert-sd 2] [--clear-sd 1]
                                                                [--window 1000] [--confirm 3]
    pytest-trt monitor rules NAME.monitor.json [-o rules.yml] [--range 30m] [--for 10m] [--keep-firing-for 30m]
    pytest-trt monitor check NAME.monitor.json SAMPLES.npz [--window N]

Exit codes: 0 ok (``check``: no alert); 1 ``check`` raised an alert; 2 bad input (a missing or unusable
golden, spec or samples file, outputs that do not fit the spec, too few samples to judge a window), one line on
stderr naming the file and the fix.

The runtime (:mod:`pytest_trt.monitor`) is numpy-only; this module reads golden files (h5py), so it sits with
the front ends.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.errors import CommandInputError, CommandUsageError, MonitorError, TrtError

if TYPE_CHECKING:
    import numpy as np

EXIT_OK, EXIT_ALERT, EXIT_INPUT = 0, 1, 2
#: rows of a golden output read at a time while its statistics are computed
READ_ROWS = 4096
#: rows of a samples file fed to the monitor at a time, as a service's batches would come
CHECK_BATCH = 256


def spec_from_golden(path: Path, *, config: str | None = None, policy: Any = None) -> Any:
    """The :class:`~pytest_trt.monitor.spec.MonitorSpec` of a golden file's snapshot (its classifier outputs).

    Means and bootstrap SDs are the ones the golden recorded for its drift check (computed the same way when a
    golden predates them); histograms are computed from the snapshot's outputs.
    """
    from pytest_trt.common.filehash import sha256_file
    from pytest_trt.compare import accumulate
    from pytest_trt.golden.store import GoldenFile
    from pytest_trt.monitor.spec import MonitorSpec, Policy, output_reference

    if not path.is_file():
        raise CommandInputError(f"{path}: no such golden file")
    try:
        with GoldenFile(path) as g:
            configs = sorted(g)
            if config is None and len(configs) == 1:
                config = configs[0]
            if config is None or config not in configs:
                have = ", ".join(configs) or "none"
                raise CommandUsageError(f"{path}: {'pass --config NAME; ' if config is None else ''}"
                                        f"snapshot {config!r} is not in the file (snapshots: {have})")
            snap = g[config]
            approvals = [a for a in g.approvals() if a.get("config") == config
                         and a.get("generation") == snap.generation]
            outputs = {}
            for name, ds in sorted(snap.outputs.items()):
                base = accumulate.baseline_of(snap.baselines, name)
                if base is not None and len(ds.shape) == 2:
                    recorded = {s.stat: (s.mean, s.sd) for s in base.stats}
                    outputs[name] = output_reference(name, ds, logits=base.logits, recorded=recorded,
                                                     rows=READ_ROWS)
            provenance = snap.provenance.to_dict()
    except TrtError as exc:
        raise CommandInputError(str(exc) if str(path) in str(exc) else f"{path}: {exc}") from None
    except (OSError, KeyError, ValueError) as exc:
        raise CommandInputError(f"{path}: cannot read the golden ({exc.__class__.__name__}: {exc})") from None
    if not outputs:
        raise CommandUsageError(f"{path}: snapshot {config!r} has no classifier output with a distribution baseline "
                                "(float (N, C) class scores); declare it with check(classifier=[...]) and approve "
                                "a refresh")
    approval = approvals[-1] if approvals else None
    golden = {
        "file": path.name, "sha256": sha256_file(path), "generation": snap.generation,
        "dataset_sha256": provenance.get("dataset_sha256"), "provenance": provenance,
        "approval": None if approval is None else {k: approval.get(k) for k in ("time", "approver", "reason",
                                                                                 "test", "report")},
    }
    return MonitorSpec(config, outputs, policy or Policy(), golden)


def _policy(args: argparse.Namespace) -> Any:
    from pytest_trt.monitor.spec import Policy

    return Policy().replace(alert_sd=args.alert_sd, clear_sd=args.clear_sd, window=args.window, confirm=args.confirm)


def cmd_spec(args: argparse.Namespace) -> int:
    from pytest_trt.common.fileio import write_bytes_atomic

    spec = spec_from_golden(args.golden, config=args.config, policy=_policy(args))
    text = spec.to_json()
    try:
        write_bytes_atomic(args.output, text.encode("utf-8"))
    except OSError as exc:
        raise CommandInputError(f"{args.output}: cannot write the spec ({exc})") from None
    doc = {"spec": str(args.output), "sha256": spec.sha256, "config": spec.config,
           "outputs": sorted(spec.outputs), "golden": spec.golden, "policy": spec.policy.to_dict()}
    lines = [f"{args.output}: monitor spec of {spec.config} (golden {args.golden.name} generation "
             f"{spec.golden['generation']}), outputs {', '.join(sorted(spec.outputs))}, {len(text)} bytes, "
             f"sha256 {spec.sha256}"]
    _emit(args, doc, lines)
    return EXIT_OK


def cmd_rules(args: argparse.Namespace) -> int:
    from pytest_trt.common.fileio import write_bytes_atomic
    from pytest_trt.monitor.prometheus import alert_rules
    from pytest_trt.monitor.spec import load_spec

    spec = load_spec(args.spec)
    text = alert_rules(spec, range_=args.range, for_=args.for_, keep_firing_for=args.keep_firing_for)
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        write_bytes_atomic(args.output, text.encode("utf-8"))
    except OSError as exc:
        raise CommandInputError(f"{args.output}: cannot write the rules ({exc})") from None
    _emit(args, {"rules": str(args.output), "spec_sha256": spec.sha256},
          [f"{args.output}: {3 * len(spec.outputs)} alert rules of {spec.config}"])
    return EXIT_OK


def load_samples(path: Path, outputs: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The monitored outputs of a ``.npz`` of served outputs (keys are output names)."""
    import numpy as np

    if not path.is_file():
        raise CommandInputError(f"{path}: no such samples file")
    try:
        with np.load(path, allow_pickle=False) as z:
            found = {k: np.asarray(z[k]) for k in z.files if k in outputs}
            keys = list(z.files)
    except (OSError, ValueError, EOFError) as exc:
        raise CommandInputError(f"{path}: not a readable .npz of outputs ({exc.__class__.__name__}: {exc}); "
                                "write one with numpy.savez(path, <output name>=scores)") from None
    missing = [o for o in outputs if o not in found]
    if missing:
        raise CommandUsageError(f"{path}: no array for monitored output(s) {', '.join(map(repr, missing))} "
                                f"(the file holds {', '.join(map(repr, keys)) or 'nothing'}); "
                                "save served outputs under their output names")
    return found


def run_check(spec: Any, samples: Mapping[str, np.ndarray], source: str) -> Any:
    """Feed ``samples`` in order, :data:`CHECK_BATCH` rows at a time; the final status."""
    from pytest_trt.monitor.runtime import OutputMonitor

    monitor = OutputMonitor(spec)
    rows = {len(a) for a in samples.values()}
    n = max(rows)
    for start in range(0, n, CHECK_BATCH):
        batch = {k: v[start : start + CHECK_BATCH] for k, v in samples.items() if start < len(v)}
        try:
            monitor.observe(batch)
        except MonitorError as exc:
            raise CommandUsageError(f"{source}: {exc}") from None
    status = monitor.status()
    short = [o for o in status.outputs if o.windows == 0]
    if short:
        o = short[0]
        raise CommandUsageError(f"{source}: output {o.output!r} has {o.samples} finite samples, fewer than one "
                                f"window ({spec.policy.window}); nothing was judged. Collect more samples or "
                                "pass --window N")
    return status


def cmd_check(args: argparse.Namespace) -> int:
    from pytest_trt.monitor.spec import load_spec

    spec = load_spec(args.spec)
    if args.window is not None:
        spec = spec.with_policy(spec.policy.replace(window=args.window))
    status = run_check(spec, load_samples(args.samples, tuple(spec.outputs)), str(args.samples))
    raised = any(o.alerts for o in status.outputs)
    p = spec.policy
    lines = [f"{args.samples}: {'ALERT' if raised else 'no alert'} against {args.spec} ({spec.config}, golden "
             f"generation {spec.golden.get('generation', '?')}; window {p.window}, alert above {p.alert_sd:g} SD "
             f"in {p.confirm} window(s) in a row, clear below {p.clear_sd:g} SD)"]
    lines += ["  " + o.line() for o in status.outputs]
    _emit(args, {**status.to_dict(), "raised": raised}, lines)
    return EXIT_ALERT if raised else EXIT_OK


def _emit(args: argparse.Namespace, doc: Any, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(doc, indent=2, sort_keys=True, default=str))
    else:
        print("\n".join(lines))


def _guard(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Bad input becomes one line on stderr and exit 2, never a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (MonitorError, CommandInputError, CommandUsageError) as exc:
            print(f"pytest-trt monitor: {exc}", file=sys.stderr)
            return EXIT_INPUT

    return run


def add_monitor_commands(groups: Any, common: argparse.ArgumentParser) -> None:
    """Register ``pytest-trt monitor ...`` on the top-level subparsers ``groups``."""
    sub = groups.add_parser("monitor", help="gray-release monitor: spec from a golden, Prometheus rules, check "
                                            "served outputs").add_subparsers(
        dest="command", required=True, metavar="{spec,rules,check}")
    p = sub.add_parser("spec", parents=[common], help="write a golden's reference statistics as a monitor spec")
    p.add_argument("golden", type=Path, metavar="GOLDEN.h5")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="NAME.monitor.json",
                   help="where the spec is written")
    p.add_argument("--config", help="the snapshot (needed when the file holds several)")
    p.add_argument("--alert-sd", type=float, metavar="SD", help="a window breaches above this many SDs (default 2)")
    p.add_argument("--clear-sd", type=float, metavar="SD",
                   help="an alert clears on a window below this many SDs (default 1)")
    p.add_argument("--window", type=int, metavar="N", help="samples per judged window (default 1000)")
    p.add_argument("--confirm", type=int, metavar="N",
                   help="breaching windows in a row that raise the alert (default 3)")
    p.set_defaults(func=_guard(cmd_spec))
    p = sub.add_parser("rules", parents=[common], help="Prometheus alert rules of a monitor spec")
    p.add_argument("spec", type=Path, metavar="NAME.monitor.json")
    p.add_argument("-o", "--output", type=Path, metavar="RULES.yml", help="write here instead of stdout")
    p.add_argument("--range", default="30m", metavar="DURATION", help="time range each alert judges (default 30m)")
    p.add_argument("--for", dest="for_", default="10m", metavar="DURATION",
                   help="how long a drift must last to fire (default 10m)")
    p.add_argument("--keep-firing-for", default="30m", metavar="DURATION",
                   help="how long an alert keeps firing once the drift is gone (default 30m)")
    p.set_defaults(func=_guard(cmd_rules))
    p = sub.add_parser("check", parents=[common], help="judge served outputs saved as .npz (exit 1 on an alert)")
    p.add_argument("spec", type=Path, metavar="NAME.monitor.json")
    p.add_argument("samples", type=Path, metavar="SAMPLES.npz")
    p.add_argument("--window", type=int, metavar="N", help="samples per judged window (default: the spec's)")
    p.set_defaults(func=_guard(cmd_check))
