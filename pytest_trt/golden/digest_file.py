"""A golden's digest file, ``<config>.h5.sha256`` beside it, and the errors that name it.

An approved update records the sha256 of the whole file there (``sha256sum`` format, so ``sha256sum -c`` checks it
too) and in its APPROVALS.jsonl line.  While an update replaces the golden it names both the old and the new digest
(:func:`pytest_trt.golden.atomic.update`), so a kill at any moment leaves a file that matches it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pytest_trt.common.fileio import write_text_atomic
from pytest_trt.compare.render import update_command
from pytest_trt.errors import GoldenCorrupt

SIDECAR_SUFFIX = ".sha256"
_LINE = re.compile(r"^([0-9a-f]{64}) [ *](.+)$")


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def restore_hint(path: Path) -> str:
    return (f"Restore it from version control (git checkout -- {path} {sidecar_path(path).name}), or, if the "
            f"change is wanted, move it away and approve a refresh: {update_command()}")


def read_sidecar(path: Path) -> tuple[str, ...] | None:
    """The digests ``<file>.sha256`` accepts for ``path`` (None: no sidecar)."""
    side = sidecar_path(path)
    try:
        text = side.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenCorrupt(f"golden digest file {side} cannot be read ({exc}). {restore_hint(path)}",
                            path=str(path)) from None
    digests = []
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line.strip())
        if m is None or m.group(2) != path.name:
            raise GoldenCorrupt(f"golden digest file {side} line {lineno} is not '<sha256>  {path.name}' "
                                f"({line[:80]!r}). {restore_hint(path)}", path=str(path))
        digests.append(m.group(1))
    if not digests:
        raise GoldenCorrupt(f"golden digest file {side} is empty. {restore_hint(path)}", path=str(path))
    return tuple(digests)


def write_sidecar(path: Path, digests: Iterable[str]) -> None:
    """``<file>.sha256`` accepting ``digests`` (atomically)."""
    write_text_atomic(sidecar_path(path), "".join(f"{d}  {path.name}\n" for d in dict.fromkeys(digests)))


def mismatch_error(path: Path, expected: Iterable[str], found: str, data: Path | None = None,
                   where: str = "") -> GoldenCorrupt:
    expected = list(expected)
    return GoldenCorrupt(
        f"golden file {path} does not match its approved digest ({sidecar_path(path).name}: "
        f"{', '.join(expected)}; found {found}{where}){lfs_note(data or path)}: it was changed or damaged after its "
        f"approval, so {'h5py was given none of the changed bytes' if where else 'it was not opened'} and it was "
        f"left untouched. {restore_hint(path)}",
        path=str(path), expected=expected, found=found,
    )


def lfs_note(path: Path) -> str:
    """A note for a failure message when ``path`` is a Git LFS pointer, not the file ("" otherwise)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return ""
    if head.startswith(b"version https://git-lfs"):
        return "; it is a Git LFS pointer, not the file (run git lfs pull)"
    return ""
