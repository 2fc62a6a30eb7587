"""The approval log as a hash chain, and its verification (``pytest-trt golden log verify``).

Each line of ``APPROVALS.jsonl`` carries ``prev_sha256``: the sha256 of the previous non-blank line's bytes
(without its line end), :data:`GENESIS` for the first.  Editing, removing or reordering a line breaks the
link of the line after it; removing the *last* line breaks nothing in the log, so each golden file's
approval records hold the same ``prev_sha256`` (the chain head the line was appended to): a record whose
line is gone is found from the golden side.

Lines written before the chain existed (no ``prev_sha256``) are *legacy*: listed, never failed.  A line that
is not a JSON object (a write torn by a kill) is listed too; the next line chains to its bytes all the same.
Signed lines are checked with :mod:`pytest_trt.golden.signing` against the allowed-signers file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_trt.golden import signing

GENESIS = "0" * 64
PREV = "prev_sha256"


def line_sha256(raw: bytes) -> str:
    """The sha256 of one line's bytes, without its line end."""
    return hashlib.sha256(raw.rstrip(b"\r\n")).hexdigest()


def lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of each non-blank line (the chain skips blank ones)."""
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if raw.strip():
            yield lineno, raw


def head(data: bytes) -> str:
    """The chain head of a log's bytes: the sha256 of its last non-blank line, :data:`GENESIS` when empty."""
    last = None
    for _, raw in lines(data):
        last = raw
    return GENESIS if last is None else line_sha256(last)


def _record(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Problem:
    """One finding, at ``line`` of the log (0: found from a golden file)."""

    line: int
    text: str


@dataclass
class LogReport:
    """What :func:`verify_log` found; ``problems`` fail, ``legacy``/``unsigned``/``unreadable`` are listed."""

    path: Path
    lines: int = 0
    problems: list[Problem] = field(default_factory=list)
    legacy: list[int] = field(default_factory=list)
    unsigned: list[int] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)
    signers: dict[str, int] = field(default_factory=dict)  # principal -> lines signed

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> list[str]:
        """Human lines: the first problem and the count, then what was listed."""
        out = []
        if self.problems:
            first = self.problems[0]
            where = f"{self.path}:{first.line}" if first.line else str(self.path)
            out.append(f"FAIL {where}: {first.text}")
            if len(self.problems) > 1:
                out.append(f"{len(self.problems) - 1} more problem(s):")
                out += [f"  {self.path}:{p.line}: {p.text}" if p.line else f"  {p.text}" for p in self.problems[1:]]
        else:
            signed = sum(self.signers.values())
            out.append(f"ok {self.path}: {self.lines} line(s), chain intact, {signed} signed"
                       + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(self.signers.items()))})" if signed else ""))
        if self.legacy:
            out.append(f"lines {_ranges(self.legacy)} predate the chain (no {PREV}): not tamper-evident; "
                       "they stay as they are, later lines are chained to them")
        if self.unsigned:
            out.append(f"unsigned line(s): {_ranges(self.unsigned)}")
        if self.unreadable:
            out.append(f"line(s) {_ranges(self.unreadable)} are not approval records (a torn write?); the chain "
                       "runs through their bytes")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "ok": self.ok, "lines": self.lines,
                "problems": [{"line": p.line, "text": p.text} for p in self.problems],
                "legacy": self.legacy, "unsigned": self.unsigned, "unreadable": self.unreadable,
                "signers": self.signers}


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def verify_log(path: Path, allowed: Path | None, *, require_signed: bool = False,
               goldens: Iterable[tuple[str, list[dict[str, Any]]]] | None = None) -> LogReport:
    """Walk ``path`` (an APPROVALS.jsonl): links, signatures, and each golden's chain heads.

    ``goldens``: ``(file name, approval records)`` of the golden files beside the log (the caller reads
    them; h5py stays out of this module).  ``require_signed`` turns unsigned chained lines into problems.
    """
    report = LogReport(path)
    data = path.read_bytes() if path.is_file() else b""
    seen: dict[str, int] = {}  # line sha256 -> line number, of every line (a reordered line may come later)
    for lineno, raw in lines(data):
        seen.setdefault(line_sha256(raw), lineno)
    prev_number, prev_hash = 0, GENESIS
    chained = False
    records: dict[str, dict[str, Any]] = {}  # prev_sha256 -> record of a chained line
    for lineno, raw in lines(data):
        report.lines += 1
        digest = line_sha256(raw)
        rec = _record(raw)
        if rec is None:
            report.unreadable.append(lineno)
        elif PREV not in rec:
            if chained:
                report.problems.append(Problem(lineno, f"line {lineno} has no {PREV} but follows chained lines: "
                                                       "it was added by hand or rewritten"))
            else:
                report.legacy.append(lineno)
        else:
            chained = True
            if rec.get(PREV) != prev_hash:
                report.problems.append(Problem(lineno, _broken_link(lineno, prev_number, rec.get(PREV), seen)))
            records.setdefault(str(rec.get(PREV)), rec)
            _check_signature(report, lineno, rec, allowed, require_signed)
        prev_number, prev_hash = lineno, digest
    for name, approvals in goldens or ():
        for a in approvals:
            head_of = a.get(PREV)
            if not isinstance(head_of, str):
                continue  # a record written before the chain
            rec = records.get(head_of)
            if rec is None or rec.get("file") != name or rec.get("generation") != a.get("generation"):
                report.problems.append(Problem(0, (
                    f"golden {name} [{a.get('config')}] generation {a.get('generation')} was approved on chain "
                    f"head {head_of[:16]}..., and no line of {path.name} follows that head for it: its line was "
                    "removed (or the log replaced)")))
    report.problems.sort(key=lambda p: (p.line == 0, p.line))
    return report


def _broken_link(lineno: int, prev_number: int, claimed: Any, seen: dict[str, int]) -> str:
    if prev_number == 0:
        return (f"line {lineno} is the first line but names a previous line ({str(claimed)[:16]}...): lines "
                "before it were removed")
    if isinstance(claimed, str) and claimed in seen:
        return (f"line {lineno} follows line {seen[claimed]}, not line {prev_number}: lines were reordered "
                "or a line was removed")
    return (f"line {lineno} does not follow line {prev_number}: line {prev_number} was edited, or a line between "
            "them was removed")


def _check_signature(report: LogReport, lineno: int, rec: dict[str, Any], allowed: Path | None,
                     require_signed: bool) -> None:
    sig = rec.get(signing.SIGNATURE)
    if not isinstance(sig, dict) or not isinstance(sig.get("sshsig"), str):
        report.unsigned.append(lineno)
        if require_signed:
            report.problems.append(Problem(lineno, f"line {lineno} is not signed"))
        return
    if allowed is None:
        report.unsigned.append(lineno)  # cannot be checked: counted as unsigned, said in the summary
        if require_signed:
            report.problems.append(Problem(lineno, f"line {lineno} is signed but no allowed-signers file was given "
                                                   "(--approvers or ini trt_approvers)"))
        return
    checked = signing.check(signing.message(rec), sig["sshsig"], str(rec.get("principal", "")), allowed)
    if not checked.ok:
        report.problems.append(Problem(lineno, f"line {lineno}: {checked.problem}"))
    else:
        assert checked.principal is not None
        report.signers[checked.principal] = report.signers.get(checked.principal, 0) + 1
