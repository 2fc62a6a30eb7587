"""A bundle's sidecar: what the bundle holds, readable without opening the archive.

``.<bundle>.state.json`` beside each bundle records the digest of the bundle's
manifest (and signature), the digest of the *inputs* it was made from (see
:func:`pytest_trt.audit.bundle.inputs_digest`), the bundle file's sha256, size and mtime, and its golden
verdicts.  On a cache hit the recorder computes the inputs digest (a few small
hashes, no member is built) and, when it matches the sidecar of an unchanged file,
the bundle is neither rebuilt nor rewritten and nothing is gunzipped, so a suite
served from the cache does not rebuild every bundle only to find the same bytes.  When
the inputs differ (or are unknown: a fresh build) the members are built and their
manifest compared as before, so equal content is still never rewritten.

The sidecar is a cache of facts, never evidence: a bundle whose size, mtime, ctime
or inode differs from its sidecar is verified (and set aside when it fails) and
rewritten, and ``pytest-trt bundle verify`` checks the bundle itself.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_trt.common.filehash import stat_identity
from pytest_trt.common.fileio import write_json_atomic

SCHEMA = 3
#: sidecars this version reads (2: written before the inputs digest existed; it never matches one)
READABLE = (2, 3)


def sidecar_path(bundle: Path) -> Path:
    return bundle.with_name(f".{bundle.name}.state.json")


def members_digest(manifest: bytes | memoryview, signature: bytes | memoryview | None) -> str:
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
    inputs_sha256: str | None = None  # None: made where the inputs digest was not known
    #: the attestations beside the bundle were written for it: ``{"bundle_sha256", "key"}`` (key: the signing
    #: key file's sha256, None unsigned); None when none were written for these bytes
    attested: dict[str, Any] | None = None


def read_state(bundle: Path) -> BundleState | None:
    """The sidecar of ``bundle`` when it describes the file on disk now; None otherwise."""
    try:
        data = json.loads(sidecar_path(bundle).read_text(encoding="utf-8"))
        st = os.stat(bundle)
        if data.get("schema") not in READABLE:
            return None
        state = BundleState(**{k: data[k] for k in BundleState.__dataclass_fields__ if k in data})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if (state.size, state.mtime_ns, state.ctime_ns, state.inode) != stat_identity(st):
        return None  # the bundle changed (or was replaced) since the sidecar was written
    return state


def on_disk(bundle: Path) -> tuple[str, int] | None:
    """The sha256 and size of ``bundle`` as it is now: from its sidecar when that describes it, else hashed; None
    when it is gone or unreadable."""
    state = read_state(bundle)
    if state is not None:
        return state.sha256, state.size
    from pytest_trt.common.filehash import sha256_and_size

    try:
        return sha256_and_size(bundle)
    except OSError:
        return None


def write_state(bundle: Path, *, members_sha256: str, sha256: str, size: int, engine_sha256: str,
                golden: dict[str, Any] | None, inputs_sha256: str | None,
                attested: dict[str, Any] | None = None) -> None:
    """Record the bundle just written (call right after its atomic rename), or one found identical."""
    st = os.stat(bundle)
    state = BundleState(members_sha256, sha256, size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, engine_sha256, golden,
                        inputs_sha256, attested)
    # no fsync: a sidecar lost or torn by a power cut fails read_state and the bundle is verified instead
    write_json_atomic(sidecar_path(bundle), {"schema": SCHEMA, **asdict(state)}, fsync=False)
