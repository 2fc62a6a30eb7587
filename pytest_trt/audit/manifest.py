"""``MANIFEST.sha256``: the sha256 of every other bundle member, in ``sha256sum`` format.

The format is exactly what ``sha256sum -c`` reads, so an auditor can check an
extracted bundle with standard tools: one line per member, sorted by name,
``<64 hex>  <name>\\n``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

MANIFEST = "MANIFEST.sha256"
_LINE = re.compile(r"^([0-9a-f]{64})  ([A-Za-z0-9][A-Za-z0-9._-]*)$")


def sha256_hex(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def render_manifest(hashes: Mapping[str, str]) -> bytes:
    """Manifest bytes for ``{member name: sha256 hex}``."""
    return "".join(f"{hashes[name]}  {name}\n" for name in sorted(hashes)).encode("ascii")


def parse_manifest(data: bytes) -> dict[str, str]:
    """``{member name: sha256 hex}``; raises ``ValueError`` naming the first bad line.

    Strict on purpose: the manifest is the signed object, so only the one
    canonical spelling (sorted, lower-case hex, two spaces, final newline) is
    accepted and a changed byte cannot produce an equivalent manifest.
    """
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("manifest is not ASCII") from None
    if not text.endswith("\n"):
        raise ValueError("manifest does not end with a newline")
    out: dict[str, str] = {}
    for number, line in enumerate(text[:-1].split("\n"), start=1):
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"manifest line {number} is not '<sha256>  <name>': {line[:80]!r}")
        digest, name = m.groups()
        if name in out:
            raise ValueError(f"manifest line {number}: {name!r} listed twice")
        out[name] = digest
    if render_manifest(out) != data:
        raise ValueError("manifest lines are not sorted by name")
    return out
