"""Audit layer: environment capture, deterministic bundles, signatures, verification, pins, diffs.

Modules, one idea each: :mod:`.environment`, :mod:`.archive` (deterministic
and safe tar.gz), :mod:`.manifest`, :mod:`.bundle` (writer), :mod:`.sign`,
:mod:`.verify`, :mod:`.bundle_diff`, :mod:`.pins`, :mod:`.summary`,
:mod:`.recorder` (session state; its pytest side is :mod:`pytest_trt.pytest_plugin.audit`).  Nothing heavy is
imported here.
"""

from __future__ import annotations

import os

#: the file pattern of audit bundles (``catalog add`` walks folders for it; the commands print it)
BUNDLE_GLOB = "*.tar.gz"


def bundles_in(folder: str | os.PathLike[str]) -> str:
    """The bundles of ``folder`` as a shell command names them: the folder quoted, the pattern not."""
    import shlex

    return f"{shlex.quote(os.fspath(folder))}/{BUNDLE_GLOB}"
