"""Real SSH keys for the signed-approval tests (made with ssh-keygen), an allowed-signers file, and an
independent check of a log line with ``ssh-keygen -Y verify`` (the test's own canonical JSON, not the plugin's)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NAMESPACE = "pytest-trt-approval"

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen (openssh-client) is not installed")


@dataclass(frozen=True)
class Key:
    email: str
    path: Path

    @property
    def pub(self) -> str:
        return Path(str(self.path) + ".pub").read_text().strip()

    @property
    def fingerprint(self) -> str:
        out = subprocess.run(["ssh-keygen", "-lf", str(self.path) + ".pub"], capture_output=True, text=True,
                             check=True).stdout
        return out.split()[1]


def make_key(folder: Path, name: str, email: str) -> Key:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", email, "-f", str(path)], check=True)
    return Key(email, path)


def allowed_signers(path: Path, *keys: Key, principal: dict[str, str] | None = None) -> Path:
    """An OpenSSH allowed-signers file listing ``keys`` (``principal`` maps a key name to another e-mail)."""
    lines = []
    for k in keys:
        kind, blob = k.pub.split()[:2]
        email = (principal or {}).get(k.path.name, k.email)
        lines.append(f'{email} namespaces="{NAMESPACE}" {kind} {blob}')
    path.write_text("\n".join(lines) + "\n")
    return path


def log_lines(folder: Path) -> list[bytes]:
    return [raw for raw in (folder / "APPROVALS.jsonl").read_bytes().split(b"\n") if raw.strip()]


def ssh_keygen_verify(line: bytes, allowed: Path, tmp: Path) -> subprocess.CompletedProcess[bytes]:
    """``ssh-keygen -Y verify`` of one log line: the message is the line's JSON without ``signature``, canonical."""
    rec: dict[str, Any] = json.loads(line)
    sig = rec.pop("signature")
    message = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    sig_file = tmp / f"line-{hashlib.sha256(line).hexdigest()[:8]}.sig"
    sig_file.write_text(sig["sshsig"])
    return subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", str(rec["principal"]),
                           "-n", NAMESPACE, "-s", str(sig_file)], input=message, capture_output=True)
