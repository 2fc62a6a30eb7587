"""A bundle's sidecar: what the bundle holds, readable without opening the archive.

``.<bundle>.state.json`` beside each bundle records the digest of the bundle's
manifest (and signature), the bundle file's sha256, size and mtime, and its
golden verdicts.  On a cache hit the recorder recomputes the manifest (it hashes
every member but writes nothing), and when it matches the sidecar of an
unchanged file the bundle is not rewritten and nothing is gunzipped: a 50-test
suite from cache used to verify and rewrite every bundle with identical bytes
(issue #14).  The sidecar is a cache of facts, never evidence: a bundle whose
size or mtime differs from its sidecar is read and rewritten as before, and
``pytest-trt bundle verify`` checks the bundle itself.  Size, mtime, ctime and inode
must all match: a bundle edited in place or replaced (even with its mtime set back)
is verified and, when it fails, set aside as before.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_trt.fileio import write_bytes_atomic

SCHEMA = 2


def sidecar_path(bundle: Path) -> Path:
    return bundle.with_name(f".{bundle.name}.state.json")


def members_digest(manifest: bytes, signature: bytes | None) -> str:
    """sha256 of the manifest (which lists every member's sha256) and the signature, if any."""
    h = hashlib.sha256(manifest)
    h.update(b"\0")
    h.update(signature or b"")
    return h.hexdigest()


@dataclass(frozen=True)
class BundleState:
    members_sha256: str
    sha256: str
    size: int
    mtime_ns: int
    ctime_ns: int  # unlike mtime, os.utime cannot set it back: a file edited in place never matches
    inode: int
    engine_sha256: str
    golden: dict[str, Any] | None


def read_state(bundle: Path) -> BundleState | None:
    """The sidecar of ``bundle`` when it describes the file on disk now; None otherwise."""
    try:
        data = json.loads(sidecar_path(bundle).read_text(encoding="utf-8"))
        st = os.stat(bundle)
        if data.get("schema") != SCHEMA:
            return None
        state = BundleState(**{k: data[k] for k in BundleState.__dataclass_fields__})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if (state.size, state.mtime_ns, state.ctime_ns, state.inode) != (st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                                                      st.st_ino):
        return None  # the bundle changed (or was replaced) since the sidecar was written
    return state


def write_state(bundle: Path, *, members_sha256: str, sha256: str, size: int, engine_sha256: str,
                golden: dict[str, Any] | None) -> None:
    """Record the bundle just written (call right after its atomic rename)."""
    st = os.stat(bundle)
    state = BundleState(members_sha256, sha256, size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, engine_sha256, golden)
    text = json.dumps({"schema": SCHEMA, **asdict(state)}, sort_keys=True, separators=(",", ":"))
    write_bytes_atomic(sidecar_path(bundle), text.encode("utf-8"))
