"""Where pytest was invoked from versus its rootdir: pasteable test ids and rootdir surprises.

* pytest's node ids are relative to the rootdir; a command suggested in a failure
  message is pasted in the shell's current folder, which may be a subfolder.
* pytest chooses the rootdir *before* it knows plugin options, so in
  ``--trt-cache-dir DIR`` (space-separated) the DIR counts as a test path and,
  without an ini file, moves the rootdir to a common ancestor: every default folder
  (``.trt_cache``, ``golden``, ``trt-bundles``) then moves with it, silently.
  ``--trt-cache-dir=DIR`` is not affected.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path


def pasteable_nodeid(nodeid: str, *, rootpath: Path, invocation_dir: Path) -> str:
    """``nodeid`` with its file part relative to ``invocation_dir`` (where the user types the command)."""
    path, sep, rest = nodeid.partition("::")
    if not path or Path(invocation_dir) == Path(rootpath):
        return nodeid
    rel = os.path.relpath(Path(rootpath) / path, invocation_dir)
    return f"{Path(rel).as_posix()}{sep}{rest}"


def rootdir_moved_by(
    args: Sequence[str], *, path_options: Iterable[str], inipath: Path | None, invocation_dir: Path
) -> list[str]:
    """The ``--opt VALUE`` pairs whose VALUE took part in choosing the rootdir (no ini file, VALUE exists)."""
    if inipath is not None:
        return []  # an ini file fixes the rootdir to its folder
    wanted = set(path_options)
    found = []
    for i, arg in enumerate(args[:-1]):
        if arg in wanted and (Path(invocation_dir) / args[i + 1]).exists():
            found.append(f"{arg} {args[i + 1]}")
    return found


def rootdir_warning(pairs: Sequence[str], rootpath: Path) -> str:
    fixed = ", ".join(p.replace(" ", "=", 1) for p in pairs)
    return (
        f"pytest-trt: {', '.join(pairs)} took part in choosing pytest's rootdir ({rootpath}): pytest reads plugin "
        "options only after choosing it, so without an ini file a path value counts as a test path. The default "
        f"cache, golden and bundle folders resolve against that rootdir. Write {fixed}, or add a pytest.ini "
        "(or [tool.pytest.ini_options] in pyproject.toml) at your project's root."
    )
