"""Approval signatures made and checked with OpenSSH's ``ssh-keygen -Y`` (the mechanism git uses to sign commits).

An approval record is signed over its canonical JSON (:func:`message`: sorted keys, no spaces, the
``signature`` field left out) in the namespace :data:`NAMESPACE`; the armored signature goes into the
record's ``signature`` field with the signer's key fingerprint.  Who signed is decided by an OpenSSH
allowed-signers file reviewed in the repository (principals are e-mail addresses): the record's claimed
``principal`` counts only when ``ssh-keygen -Y verify`` accepts the signature for that principal.  A
failure is explained in three steps: the signature does not match the record (edited after signing);
the key is in no line of the allowed-signers file; the key belongs to another principal (a forged name).

``ssh-keygen`` runs without a controlling terminal (``start_new_session``) inside pytest, so a key with a
passphrase and no agent fails at once instead of prompting; ``SSH_AUTH_SOCK`` is kept (agent keys are
given as their ``.pub`` file).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_trt.errors import SigningUnavailable

NAMESPACE = "pytest-trt-approval"
SIGNATURE = "signature"
#: the text signed once per session before any golden moves (a key that cannot sign fails at start)
PREFLIGHT_TEXT = b"pytest-trt approval key check\n"
_FPR = re.compile(r"\b(SHA256:[A-Za-z0-9+/]+)")


class SigningFailed(Exception):
    """``ssh-keygen`` could not sign (missing key, passphrase without an agent, ...); the text says why."""


def ssh_keygen() -> str:
    """The ``ssh-keygen`` executable, else :class:`SigningUnavailable` naming the package to install."""
    found = shutil.which("ssh-keygen")
    if found is None:
        raise SigningUnavailable("approvals are signed and checked with OpenSSH's ssh-keygen, which is not on PATH: "
                                 "install openssh-client (Debian/Ubuntu) or openssh")
    return found


def message(record: Mapping[str, Any]) -> bytes:
    """The bytes a record's signature covers: its canonical JSON without the ``signature`` field."""
    body = {k: v for k, v in record.items() if k != SIGNATURE}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _run(args: list[str], data: bytes | None = None, *, tty: bool = False) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([ssh_keygen(), *args], input=data, capture_output=True, timeout=60,
                          start_new_session=not tty)


def _text(proc: subprocess.CompletedProcess[bytes]) -> str:
    return " ".join((proc.stderr + proc.stdout).decode("utf-8", "replace").split())


def sign(data: bytes, key: Path, *, tty: bool = False) -> str:
    """The armored SSH signature of ``data`` by ``key`` (private key, or a ``.pub`` whose key is in the agent)."""
    proc = _run(["-Y", "sign", "-n", NAMESPACE, "-f", str(key)], data, tty=tty)
    if proc.returncode != 0 or b"BEGIN SSH SIGNATURE" not in proc.stdout:
        raise SigningFailed(f"ssh-keygen could not sign with {key}: {_text(proc) or 'no signature made'}")
    return proc.stdout.decode("ascii")


@dataclass(frozen=True)
class Checked:
    """What one signature check found: ``principal`` and ``key`` are the allowed signer's, when ``ok``."""

    ok: bool
    principal: str | None = None
    key: str | None = None  # "SHA256:..." of the key that made the signature, when it could be read
    problem: str | None = None


def check(data: bytes, sshsig: str, claimed: str, allowed: Path) -> Checked:
    """Whether ``sshsig`` is a signature of ``data`` by a key that ``allowed`` lists for ``claimed``."""
    with tempfile.TemporaryDirectory(prefix="pytest-trt-sig-") as tmp:
        sig = Path(tmp) / "approval.sig"
        sig.write_text(sshsig, encoding="ascii", errors="replace")
        proc = _run(["-Y", "verify", "-f", str(allowed), "-I", claimed, "-n", NAMESPACE, "-s", str(sig)], data)
        if proc.returncode == 0:
            good = _FPR.search(proc.stdout.decode("utf-8", "replace"))
            return Checked(True, claimed, good.group(1) if good else None)
        if not allowed.is_file():
            return Checked(False, problem=f"the allowed-signers file {allowed} cannot be read")
        # why: first the signature against the record alone, then who the key belongs to
        raw = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], data)
        if raw.returncode != 0:
            return Checked(False, problem="the signature does not match the record (edited after signing, or not "
                                          f"a {NAMESPACE} signature): {_text(raw)}")
        found = _FPR.search(raw.stdout.decode("utf-8", "replace") + raw.stderr.decode("utf-8", "replace"))
        fpr = found.group(1) if found else None
        who = _run(["-Y", "find-principals", "-f", str(allowed), "-n", NAMESPACE, "-s", str(sig)])
        principals = [p for p in who.stdout.decode("utf-8", "replace").split() if p]
        if who.returncode != 0 or not principals:
            return Checked(False, key=fpr, problem=f"signed by key {fpr}, which is not in {allowed.name}")
        return Checked(False, principals[0], fpr,
                       problem=f"forged approver: the record names {claimed} but is signed by the key of "
                               f"{', '.join(principals)} ({fpr})")


def principals_of(sshsig: str, allowed: Path) -> tuple[list[str], str | None]:
    """The principals ``allowed`` lists for the key of ``sshsig``, and that key's fingerprint."""
    with tempfile.TemporaryDirectory(prefix="pytest-trt-sig-") as tmp:
        sig = Path(tmp) / "approval.sig"
        sig.write_text(sshsig, encoding="ascii")
        raw = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], PREFLIGHT_TEXT)
        found = _FPR.search(raw.stdout.decode("utf-8", "replace") + raw.stderr.decode("utf-8", "replace"))
        who = _run(["-Y", "find-principals", "-f", str(allowed), "-n", NAMESPACE, "-s", str(sig)])
        names = [p for p in who.stdout.decode("utf-8", "replace").split() if p] if who.returncode == 0 else []
        return names, found.group(1) if found else None


@dataclass(frozen=True)
class Signer:
    """The session's approval key, who the allowed-signers file says it is, and its fingerprint."""

    key: Path
    principal: str
    fingerprint: str | None

    def sign_record(self, record: Mapping[str, Any], *, tty: bool = False) -> dict[str, Any]:
        """``record`` with ``principal`` set and its ``signature`` field added."""
        body = {**{k: v for k, v in record.items() if k != SIGNATURE}, "principal": self.principal}
        sshsig = sign(message(body), self.key, tty=tty)
        return {**body, SIGNATURE: {"namespace": NAMESPACE, "key": self.fingerprint, "sshsig": sshsig}}


def preflight(key: Path, allowed: Path | None, *, fallback_principal: str | None, tty: bool = False) -> Signer:
    """Sign a fixed text with ``key`` once (a key that cannot sign fails here, before any golden moves) and name
    its principal: the one ``allowed`` lists for it, else ``fallback_principal`` (the git e-mail).

    Raises :class:`SigningFailed` naming the key and, when ``allowed`` does not list it, the file and the fix.
    """
    if not key.exists():
        raise SigningFailed(f"approval key {key} does not exist: give an SSH private key (or the .pub of an "
                            "agent key) with --trt-approve-key or ini trt_approve_key, or set git config "
                            "user.signingkey")
    sshsig = sign(PREFLIGHT_TEXT, key, tty=tty)
    if allowed is None:
        with tempfile.TemporaryDirectory(prefix="pytest-trt-sig-") as tmp:
            sig = Path(tmp) / "k.sig"
            sig.write_text(sshsig, encoding="ascii")
            raw = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(sig)], PREFLIGHT_TEXT)
        found = _FPR.search(_text(raw))
        return Signer(key, fallback_principal or "unknown", found.group(1) if found else None)
    names, fpr = principals_of(sshsig, allowed)
    if not names:
        raise SigningFailed(f"approval key {key} ({fpr}) is not in the allowed-signers file {allowed}: add a line "
                            f"`you@example.com namespaces=\"{NAMESPACE}\" <the key's .pub text>` through a reviewed "
                            "change, or sign with a listed key")
    chosen = fallback_principal if fallback_principal in names else names[0]
    return Signer(key, chosen, fpr)


def fingerprint_of_line(openssh_public: str) -> str:
    """``SHA256:...`` of an OpenSSH public key line (``ssh-ed25519 AAAA... comment``), as ``ssh-keygen -l`` prints."""
    import base64
    import hashlib

    blob = base64.b64decode(openssh_public.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def git_value(args: list[str], cwd: Path | None) -> str | None:
    """The stripped output of ``git ARGS`` in ``cwd``, None when git fails or prints nothing."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.strip()
    return out if proc.returncode == 0 and out else None


def approval_key(explicit: Path | None, rootdir: Path | None) -> Path | None:
    """The approval key: ``explicit`` (option or ini), else ``git config user.signingkey`` where git signs with SSH
    (``gpg.format = ssh``; a GPG key id is not an SSH key).

    A ``key::ssh-ed25519 AAAA...`` literal (an agent key, as git allows) is written to a private temporary
    ``.pub`` file, which ssh-keygen signs with through the agent.
    """
    if explicit is not None:
        return explicit
    if git_value(["config", "gpg.format"], rootdir) != "ssh":
        return None
    configured = git_value(["config", "user.signingkey"], rootdir)
    if configured is None:
        return None
    if configured.startswith("key::") or configured.startswith("ssh-"):
        text = configured.removeprefix("key::")
        fd, name = tempfile.mkstemp(prefix="pytest-trt-agent-", suffix=".pub")
        with os.fdopen(fd, "w") as fh:
            fh.write(text + "\n")
        import atexit

        atexit.register(lambda: Path(name).unlink(missing_ok=True))
        return Path(name)
    key = Path(os.path.expanduser(configured))
    return key if key.is_absolute() or rootdir is None else rootdir / key
