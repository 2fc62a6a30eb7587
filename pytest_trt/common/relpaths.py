"""Where relative model and data paths in configs resolve: the pytest rootdir in a session, else the current directory.

``BuildConfig(onnx=...)``, ``BuildConfig(timing_cache=...)``, ``BuildConfig.from_toml(path)``,
``Calibration(data=..., cache=...)`` and ``GoldenDataset.from_directory(...)`` take paths
written in a test module, which pytest may import from any current directory (``cd tests &&
pytest``).  The plugin sets the rootdir as the base for the whole session (from before the
first conftest is imported to the end); a script that never runs pytest keeps the current
directory.  A path that resolves to the same file either way is kept as written, so pins,
config JSON and bundles of a run from the rootdir do not change.

While pytest imports a test module, a missing ONNX file is kept on the config (``deferring``)
instead of raised, so only that config's tests fail: the other tests of the module still run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

#: the rootdir of the running pytest session(s), innermost last (a pytester run inside a run)
_BASES: list[Path] = []
_DEFERRING: list[bool] = []

__all__ = ["base_dir", "deferring", "describe_rule", "is_deferring", "pop_base", "push_base", "resolve"]


def push_base(rootdir: str | os.PathLike[str]) -> None:
    """From now on relative config paths resolve against ``rootdir`` (a pytest session begins)."""
    _BASES.append(Path(os.path.abspath(rootdir)))


def pop_base() -> None:
    """The session that pushed the current base ended."""
    if _BASES:
        _BASES.pop()


def base_dir() -> Path:
    """The folder relative config paths resolve against now."""
    return _BASES[-1] if _BASES else Path.cwd()


def resolve(path: str | os.PathLike[str]) -> Path:
    """``path`` under the rule: ``~`` expanded; relative paths joined to :func:`base_dir`.

    Kept as written when the current directory is the base (the same file either way).
    """
    p = Path(os.path.expanduser(os.fspath(path)))
    if p.is_absolute() or not _BASES or _same_folder(_BASES[-1], Path.cwd()):
        return p
    return Path(os.path.normpath(_BASES[-1] / p))


def _same_folder(a: Path, b: Path) -> bool:
    return a == b or a.resolve() == b.resolve()


def describe_rule() -> str:
    """The rule in words, with the folder it gives now, for error messages."""
    if _BASES:
        cwd = Path.cwd()
        other = "" if _same_folder(_BASES[-1], cwd) else f", not the current directory {cwd}"
        return (f"relative paths resolve against the pytest rootdir {_BASES[-1]}{other} "
                "(docs/options.md, 'Relative paths')")
    return (f"relative paths resolve against the current directory {Path.cwd()} (in a pytest session: against "
            "the rootdir; docs/options.md, 'Relative paths')")


@contextlib.contextmanager
def deferring() -> Iterator[None]:
    """While pytest imports a test module: a config's missing ONNX file is its tests' error, not the module's."""
    _DEFERRING.append(True)
    try:
        yield
    finally:
        _DEFERRING.pop()


def is_deferring() -> bool:
    return bool(_DEFERRING)
