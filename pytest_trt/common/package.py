"""What every layer may know of the package itself: its version, and the lazy re-export its facades share.

The public facade (``pytest_trt/__init__.py``) sits above every layer, so the modules below it take these
from here rather than from the facade.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__version__ = "0.1.0"


def lazy_attribute(package: str, table: Mapping[str, str], name: str) -> Any:
    """PEP 562 re-export for a package facade: ``name`` from the module ``table`` names for it.

    Resolving (or refusing) a name imports nothing but that module, so a facade's ``__getattr__`` stays cheap.
    """
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
