"""Who signed off a golden generation, and the rule that enough distinct people did (two-person rule).

A generation is signed off by the signed line of its refresh in ``APPROVALS.jsonl`` (same file, config,
generation and file sha256) and by ``kind: "cosign"`` lines (``pytest-trt golden approve``) naming that
refresh line's sha256.  Each signature is checked with ``ssh-keygen -Y verify`` against the allowed-signers
file; the signer is the principal the file lists for the key, never the name a line claims.

Everyone who made the change counts as one person, ``the change author``: the refresh's signer, the git
e-mail of the refresh session, the author of the last commit of the golden file
(``git log -1 -- FILE``), and any signature made with the key of the refresh's own signature or with the
bundle key of the refresh session or of this session (``--trt-sign-key``; fingerprints compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_trt.errors import GoldenUnapproved
from pytest_trt.golden import chain, signing
from pytest_trt.golden.approvals import log_path

CHANGE_AUTHOR = "the change author"
REFRESH_LINE = "refresh_line_sha256"


@dataclass
class Signoff:
    """The signers counted for one golden generation, and the lines that did not count (with why)."""

    required: int
    counted: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    refresh: dict[str, Any] | None = None  # the refresh line's record
    refresh_sha256: str | None = None
    refresh_line: int | None = None
    changers: set[str] = field(default_factory=set)  # e-mails of who made the change
    changer_keys: set[str] = field(default_factory=set)  # fingerprints of their keys

    @property
    def ok(self) -> bool:
        return len(self.counted) >= self.required


def _is(rec: dict[str, Any], file: str, config: str, generation: int, file_sha256: str) -> bool:
    return (rec.get("file") == file and rec.get("config") == config and rec.get("generation") == generation
            and rec.get("file_sha256") == file_sha256)


def signoff(golden: Path, config: str, generation: int, file_sha256: str, allowed: Path, *, required: int,
            commit_author: str | None = None, session_keys: tuple[str, ...] = ()) -> Signoff:
    """Count the distinct allowed signers of ``golden`` ``config`` ``generation`` (whose file is ``file_sha256``)."""
    path = log_path(golden.parent)
    data = path.read_bytes() if path.is_file() else b""
    result = Signoff(required)
    lines: list[tuple[int, bytes, dict[str, Any]]] = []
    for lineno, raw in chain.lines(data):
        rec = chain._record(raw)
        if rec is not None and _is(rec, golden.name, config, generation, file_sha256):
            lines.append((lineno, raw, rec))
    refreshes = [(n, raw, rec) for n, raw, rec in lines if rec.get("kind", "refresh") == "refresh"]
    if not refreshes:
        result.ignored.append(f"no line of {path.name} records this generation's refresh with the file's sha256")
        return result
    result.refresh_line, raw, result.refresh = refreshes[-1]
    result.refresh_sha256 = chain.line_sha256(raw)
    given = result.refresh.get("change")
    change: dict[str, Any] = given if isinstance(given, dict) else {}
    changers = result.changers
    changers.update(v for v in (change.get("git_email"), commit_author) if v)
    changer_keys = result.changer_keys
    changer_keys.update(k for k in (change.get("bundle_signer"), *session_keys) if k)
    signed = [(result.refresh_line, result.refresh)] + [
        (n, rec) for n, _, rec in lines
        if rec.get("kind") == "cosign" and rec.get(REFRESH_LINE) == result.refresh_sha256]
    persons: list[str] = []
    for lineno, rec in signed:
        what = "refresh" if rec is result.refresh else "co-signature"
        sig = rec.get(signing.SIGNATURE)
        if not isinstance(sig, dict) or not isinstance(sig.get("sshsig"), str):
            result.ignored.append(f"line {lineno} ({what}) is not signed")
            continue
        checked = signing.check(signing.message(rec), sig["sshsig"], str(rec.get("principal", "")), allowed)
        if not checked.ok:
            result.ignored.append(f"line {lineno} ({what}): {checked.problem}")
            continue
        principal = str(checked.principal)
        if rec is result.refresh:  # its signer made the change: later signatures by them or their key add nobody
            changers.add(principal)
            if checked.key:
                changer_keys.add(checked.key)
        if principal in changers or checked.key in changer_keys:
            person = f"{CHANGE_AUTHOR} ({principal})" if rec is result.refresh else CHANGE_AUTHOR
            if any(p.startswith(CHANGE_AUTHOR) for p in persons):
                result.ignored.append(f"line {lineno} ({what}) by {principal}: made the change, already counted once")
                continue
        else:
            person = principal
            if person in persons:
                result.ignored.append(f"line {lineno} ({what}) by {principal}: already counted")
                continue
        persons.append(person)
    result.counted = persons
    return result


_MEMO: dict[tuple[Any, ...], Signoff] = {}


def require(golden: Path, config: str, generation: int, file_sha256: str, settings: Any) -> Signoff:
    """Raise :class:`GoldenUnapproved` unless the generation has enough distinct allowed signers; memoized per
    log state and golden file digest in this process."""
    __tracebackhide__ = True
    allowed: Path | None = settings.approvers
    required = max(1, int(settings.approvals_required))
    assert allowed is not None, "the plugin refuses signed-approval settings without an allowed-signers file"
    log = log_path(golden.parent)
    try:
        st = log.stat()
        state: tuple[Any, ...] = (st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        state = ()
    key = (str(log), state, str(golden), config, generation, file_sha256, str(allowed), required,
           settings.bundle_signer)
    found = _MEMO.get(key)
    if found is None:
        author = signing.git_value(["log", "-1", "--format=%ae", "--", golden.name], golden.parent)
        keys = (settings.bundle_signer,) if settings.bundle_signer else ()
        found = signoff(golden, config, generation, file_sha256, allowed, required=required, commit_author=author,
                        session_keys=keys)
        _MEMO[key] = found
    if not found.ok:
        raise GoldenUnapproved(message(golden, config, generation, found, allowed), path=str(golden),
                               counted=found.counted, ignored=found.ignored)
    return found


def message(golden: Path, config: str, generation: int, found: Signoff, allowed: Path) -> str:
    """The failure of a generation without enough signers: counted, ignored (why), the fix."""
    need = (f"{found.required} approval signatures by distinct allowed signers (two-person rule: the change "
            "author counts once)" if found.required > 1 else "an approval signature by an allowed signer")
    lines = [f"golden {golden} [{config}] generation {generation} needs {need} of {allowed}; "
             f"it has {len(found.counted)} (signatures read from {log_path(golden.parent)})",
             f"  counted: {', '.join(found.counted) or 'nobody'}"]
    lines += [f"  not counted: {why}" for why in found.ignored]
    if found.refresh is None or not any(p.startswith(CHANGE_AUTHOR) for p in found.counted):
        lines.append("fix: refresh it again signed with a key listed in "
                     f"{allowed.name} (--trt-update-golden --trt-approve \"REASON\" --trt-approve-key KEY)")
    if found.refresh is not None and len(found.counted) < found.required:
        lines.append(f"fix: another allowed signer co-signs it: pytest-trt golden approve {golden} "
                     f"--config {config} --reason \"REASON\" --key KEY")
    return "\n".join(lines)
