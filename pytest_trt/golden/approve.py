"""``pytest-trt golden approve`` (co-sign a golden generation) and ``pytest-trt golden log verify``.

A co-signature is one chained, signed ``kind: "cosign"`` line in ``APPROVALS.jsonl`` naming the generation,
the golden file's sha256 and the sha256 of the refresh line it signs off; the golden file is only read.
A signer who made the change (:mod:`pytest_trt.golden.signoff`) or already signed is refused: the line
would count for nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.common.filehash import sha256_file
from pytest_trt.common.units import utc_now
from pytest_trt.errors import GoldenError, SigningUnavailable
from pytest_trt.golden import chain, signing, signoff
from pytest_trt.golden.approvals import approver, held_log, log_path


class ApprovalRefused(Exception):
    """The co-signature was not written; the text says why and what to do."""


@dataclass(frozen=True)
class Cosigned:
    before: signoff.Signoff
    after: signoff.Signoff
    signer: signing.Signer
    line: int


def current(golden: Path, config: str | None) -> tuple[str, int, str]:
    """``(config, current generation, file sha256)`` of ``golden``; ``config`` may be left out for a one-config file."""
    from pytest_trt.golden.store import GoldenFile, guard

    with GoldenFile(golden) as g, guard(golden):
        configs = sorted(g)
        if config is None:
            if len(configs) != 1:
                raise ApprovalRefused(f"{golden} holds snapshots of {', '.join(configs) or 'no config'}: name one "
                                      "with --config NAME")
            config = configs[0]
        if config not in configs:
            raise ApprovalRefused(f"{golden} has no snapshot of {config!r} (snapshots: {', '.join(configs) or 'none'})")
        return config, g[config].generation, g.sha256 or sha256_file(golden)


def cosign(golden: Path, config: str | None, reason: str, key: Path, allowed: Path, *, required: int,
           tty: bool = True) -> Cosigned:
    """Append a signed co-signature of ``golden``'s current generation; refuse one that would count for nobody."""
    if not reason.strip():
        raise ApprovalRefused("a co-signature needs a reason: --reason \"reviewed the deltas, CR-1234\"")
    config, generation, sha = current(golden, config)
    cwd = golden.parent
    try:
        signer = signing.preflight(key, allowed, fallback_principal=signing.git_value(["config", "user.email"], cwd),
                                   tty=tty)
    except signing.SigningFailed as exc:
        raise ApprovalRefused(str(exc)) from None
    author = signing.git_value(["log", "-1", "--format=%ae", "--", golden.name], cwd)

    def count() -> signoff.Signoff:
        return signoff.signoff(golden, config, generation, sha, allowed, required=required, commit_author=author)

    before = count()
    label = f"{golden} [{config}] generation {generation}"
    if before.refresh is None or before.refresh_sha256 is None:
        raise ApprovalRefused(f"{log_path(cwd)} has no refresh line of {label} with the file's sha256 {sha[:16]}...: "
                              "there is nothing to co-sign (was the golden refreshed without its log, or edited?)")
    if signer.principal in before.changers or signer.fingerprint in before.changer_keys:
        raise ApprovalRefused(
            f"{signer.principal} (key {signer.fingerprint}) made the change to {label} (refresh signer, git author "
            "of its commit, or the refresh session's bundle key): a co-signature by the change author does not "
            "count under the two-person rule; another allowed signer must run this command")
    if signer.principal in before.counted:
        raise ApprovalRefused(f"{signer.principal} already signed {label}")
    record: dict[str, Any] = {
        "kind": "cosign", "time": utc_now(microseconds=False), "approver": approver(cwd), "reason": reason,
        "file": golden.name, "config": config, "generation": generation, "file_sha256": sha,
        signoff.REFRESH_LINE: before.refresh_sha256,
    }
    with held_log(cwd) as log:
        log.append(record, signer, tty=tty)
        line = sum(1 for _ in chain.lines(log.path.read_bytes()))
    return Cosigned(before, count(), signer, line)


def verify_folder(folder: Path, allowed: Path | None, *, require_signed: bool = False) -> chain.LogReport:
    """:func:`chain.verify_log` of ``folder``'s APPROVALS.jsonl with the chain heads of its golden files."""
    from pytest_trt.golden.store import GoldenFile, guard

    goldens: list[tuple[str, list[dict[str, Any]]]] = []
    unreadable: list[str] = []
    for path in sorted(folder.glob("*.h5")):
        try:
            with GoldenFile(path) as g, guard(path):
                goldens.append((path.name, list(g.approvals())))
        except (GoldenError, OSError) as exc:
            unreadable.append(f"golden {path.name} cannot be read, its chain heads were not checked: "
                              f"{getattr(exc, 'message', exc)}")
    report = chain.verify_log(log_path(folder), allowed, require_signed=require_signed, goldens=goldens)
    report.problems += [chain.Problem(0, text) for text in unreadable]
    return report


__all__ = ["ApprovalRefused", "Cosigned", "SigningUnavailable", "cosign", "current", "verify_folder"]
