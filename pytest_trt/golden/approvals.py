"""Approval records: who refreshed which golden, why, and what it changed.

Each refresh appends one record inside the golden file (travels with it) and
one line to ``<golden_dir>/APPROVALS.jsonl`` (one reviewable log per repo), the
line with the new file's sha256 (``file_sha256``).  The two are one unit, log
first: the line is appended once the new file is complete and before it
replaces the old one (:func:`pytest_trt.golden.atomic.update`), so a golden
generation never lacks its line; a kill in between leaves a line for a
generation that was not written, which the next approval of it follows.

The log is appended on a fresh line (a torn last line is closed and kept, with
a warning); lines that are not JSON objects are reported with their number and
skipped by readers, never dropped from the file.

The log is a hash chain (:mod:`pytest_trt.golden.chain`): each line names the
sha256 of the line before it in ``prev_sha256``, and the golden file's record of
the same approval holds the same value.  A refresh holds the log's lock from
before the golden's record is written until its line is appended
(:func:`held_log`; lock order everywhere: log, then golden file).  With an
approval key the line is signed (:mod:`pytest_trt.golden.signing`).
"""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_trt.common.fileio import LOCK_TIMEOUT_S, acquire_lock
from pytest_trt.errors import ApprovalLogWarning, FolderUnusable
from pytest_trt.golden import chain

if TYPE_CHECKING:
    from pytest_trt.golden.signing import Signer

APPROVALS_FILE = "APPROVALS.jsonl"


@dataclass(frozen=True)
class Approval:
    """One approved refresh of a snapshot."""

    time: str  # ISO 8601, UTC
    approver: str
    reason: str
    file: str
    config: str
    generation: int
    old_provenance: dict[str, Any] | None
    new_provenance: dict[str, Any]
    deltas: dict[str, Any]  # output -> figures of new vs old outputs
    structure: dict[str, Any] | None  # record diff old -> new, None when not compared
    test: str | None = None
    report: dict[str, Any] | None = None  # {"path", "sha256"} of the upgrade report the approval was made on
    kind: str = "refresh"  # "cosign": a second signer of a refresh (pytest-trt golden approve)
    prev_sha256: str | None = None  # the approval log's chain head this approval's line follows
    principal: str | None = None  # the signer, as the allowed-signers file names them (signed approvals)
    #: who made the change, for the two-person rule: {"git_email", "bundle_signer"}
    change: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def approver(cwd: Path | None = None) -> str:
    """``git config user.name`` (plus email), else the OS user."""
    try:
        name = subprocess.run(["git", "config", "user.name"], cwd=cwd, capture_output=True, text=True, timeout=10)
        email = subprocess.run(["git", "config", "user.email"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if name.returncode == 0 and name.stdout.strip():
            mail = email.stdout.strip()
            return name.stdout.strip() + (f" <{mail}>" if mail else "")
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no passwd entry in some containers
        return os.environ.get("USER") or "unknown"


def log_path(golden_dir: Path) -> Path:
    return golden_dir / APPROVALS_FILE


def check_log(golden_dir: Path) -> Path:
    """Raise :class:`FolderUnusable` unless ``APPROVALS.jsonl`` can be appended to (before anything is written)."""
    path = log_path(golden_dir)
    if path.exists() and not path.is_file():
        raise FolderUnusable(
            f"approval log {path} is not a file (a folder?): approvals cannot be recorded and the golden was left "
            "as it was. Move it away (the approvals it should hold are inside each golden file, shown by "
            "`pytest-trt golden show`), then approve again", path=path,
        )
    return path


class HeldLog:
    """The approval log while its lock is held: its chain ``head`` and :meth:`append`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._data = path.read_bytes() if path.exists() else b""
        except OSError as exc:
            raise _unusable(path, exc) from None
        self.head = chain.head(self._data)

    def append(self, record: Mapping[str, Any], signer: Signer | None = None, *, tty: bool = False) -> bytes:
        """Append ``record`` chained to :attr:`head` (and signed by ``signer``); return the line's bytes.

        Starts on a fresh line when the last one is torn, warns about lines that are not JSON objects, and
        leaves the log as it was when the write fails (raised as :class:`FolderUnusable`).
        """
        body = {**dict(record), chain.PREV: self.head}
        if signer is not None:
            body = signer.sign_record(body, tty=tty)
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
        text, size = self._data, len(self._data)
        torn = size > 0 and not text.endswith(b"\n")
        lineno = text.count(b"\n") + 1
        warn_bad_lines(self.path, [b for b in bad_lines(text) if not (torn and b[0] == lineno)])
        out = raw + b"\n"
        if torn:
            warnings.warn(ApprovalLogWarning(
                f"{self.path}:{lineno}: the last line was torn (no line end); it is kept as it is and the new "
                "approval starts on the next line"), stacklevel=2)
            out = b"\n" + out
        try:
            with open(self.path, "ab") as fh:
                try:
                    fh.write(out)
                    fh.flush()
                    os.fsync(fh.fileno())
                except BaseException:
                    fh.truncate(size)  # under the lock: nothing but our own bytes follow ``size``
                    raise
        except OSError as exc:
            raise _unusable(self.path, exc) from None
        self._data = text + out
        self.head = chain.line_sha256(raw)
        return raw


def _unusable(path: Path, exc: OSError) -> FolderUnusable:
    return FolderUnusable(f"approval log {path} cannot be written ({exc.strerror or exc}); the golden was left "
                          "as it was. Make it writable, then approve again", path=path)


@contextmanager
def held_log(golden_dir: Path, *, timeout: float = LOCK_TIMEOUT_S,
             folder_error: Callable[[OSError], Exception] | None = None) -> Iterator[HeldLog]:
    """Hold ``APPROVALS.jsonl``'s lock (serialized across processes) and yield it for appending.

    ``folder_error``: the error to raise when the lock file cannot be created (a read-only golden folder).
    """
    path = check_log(golden_dir)
    try:
        held = acquire_lock(path.with_name(path.name + ".lock"), what=f"approval log {path}", timeout=timeout)
    except OSError as exc:
        raise (folder_error(exc) if folder_error is not None else _unusable(path, exc)) from None
    try:
        yield HeldLog(path)
    finally:
        held.release()


def append_jsonl(golden_dir: Path, record: Mapping[str, Any], *, timeout: float = LOCK_TIMEOUT_S,
                 signer: Signer | None = None) -> Path:
    """Append ``record`` as one chained line to ``APPROVALS.jsonl`` (see :meth:`HeldLog.append`)."""
    with held_log(golden_dir, timeout=timeout) as log:
        log.append(record, signer)
    return log.path


def parse_lines(data: bytes) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """The approval records of a log's bytes, and ``(line number, text)`` of each non-blank line that is not one."""
    records: list[dict[str, Any]] = []
    bad = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            value = None
        if isinstance(value, dict):
            records.append(value)
        else:
            bad.append((lineno, raw[:60].decode("utf-8", "replace")))
    return records, bad


def bad_lines(data: bytes) -> list[tuple[int, str]]:
    """``(line number, text)`` of each non-blank line that is not a JSON object."""
    return parse_lines(data)[1]


def warn_bad_lines(path: Path, bad: list[tuple[int, str]]) -> None:
    for lineno, text in bad[:5]:
        warnings.warn(ApprovalLogWarning(f"{path}:{lineno}: not an approval record ({text!r}); skipped"),
                      stacklevel=3)
    if len(bad) > 5:
        warnings.warn(ApprovalLogWarning(f"{path}: {len(bad) - 5} more lines are not approval records"),
                      stacklevel=3)


def read_jsonl(golden_dir: Path) -> list[dict[str, Any]]:
    """The approval records of ``APPROVALS.jsonl``; lines that are not JSON objects are skipped with a warning."""
    path = log_path(golden_dir)
    if not path.is_file():
        return []
    records, bad = parse_lines(path.read_bytes())  # one read and one parse of each line
    warn_bad_lines(path, bad)
    return records
