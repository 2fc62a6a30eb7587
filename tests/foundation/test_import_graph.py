"""The package's import rules (scripts/import_graph.py): layers only point down, no cycles, every module placed.

The checker itself is tested on a small package written here, so that a checker that finds nothing cannot pass.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)
    spec.loader.exec_module(module)
    return module


def test_pytest_trt_has_no_upward_import_no_cycle_and_no_unplaced_module() -> None:
    found = _checker().violations(ROOT / "pytest_trt")
    assert found == [], "import rules broken (see scripts/import_graph.py):\n" + "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pytest_trt" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pytest_trt"


def test_checker_reports_an_upward_lazy_import_a_cycle_and_an_unplaced_module(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "__init__.py": "from pytest_trt.golden.store import X\n",  # the facade may name anything
        "errors.py": "def f():\n    from pytest_trt.golden import store  # lazy, still upward\n",
        "golden/__init__.py": "",
        "golden/store.py": "from .verify import V\nX = 1\n",
        "golden/verify.py": "from pytest_trt.golden.store import X\nV = 2\n",
        "compare/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_trt.golden import store\n",
        "mystery.py": "",
    })
    found = _checker().violations(package, strict=False)
    assert found == [
        "upward: pytest_trt.errors (layer 0) imports pytest_trt.golden.store (layer 5)",
        "unplaced: pytest_trt.mystery (add 'mystery' to a layer in scripts/import_graph.py)",
        "cycle: pytest_trt.golden.store <-> pytest_trt.golden.verify",
    ]


def test_checker_counts_type_checking_imports_and_refuses_imports_of_the_facade(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "__init__.py": "__version__ = '1'\n",
        "errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_trt.golden.store import X\n",
        "golden/__init__.py": "",
        "golden/store.py": "from pytest_trt import __version__\nfrom pytest_trt import errors\nX = 1\n",
    })
    checker = _checker()
    assert checker.violations(package) == [
        "facade: pytest_trt.golden.store imports pytest_trt itself (the public face sits above every layer: "
        "import from the defining module)",
        "upward: pytest_trt.errors (layer 0) imports pytest_trt.golden.store (layer 5)",
        "cycle: pytest_trt.errors <-> pytest_trt.golden.store",
    ]
    # the lenient count (annotations only) sees neither the TYPE_CHECKING import nor, so, the cycle
    assert checker.violations(package, strict=False) == [
        "facade: pytest_trt.golden.store imports pytest_trt itself (the public face sits above every layer: "
        "import from the defining module)",
    ]
