"""The import rules of ``scripts/import_graph.py`` hold for the package: layers, no cycle, every module placed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_breaks_no_import_rule() -> None:
    assert import_graph().violations(ROOT / "pytest_trt") == []


def test_the_checker_sees_upward_lazy_and_cyclic_imports(tmp_path: Path) -> None:
    package = tmp_path / "pytest_trt"
    (package / "backends").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "errors.py": "def f():\n    from pytest_trt import golden  # lazy, upward: 0 -> 5\n",
        "golden.py": "",
        "backends/__init__.py": "",
        "backends/a.py": "from pytest_trt.backends import b\n",
        "backends/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest_trt import golden\n"
                         "from pytest_trt.backends import a\n",
        "nowhere.py": "",
    }
    for rel, text in files.items():
        (package / rel).write_text(text, encoding="utf-8")
    found = import_graph().violations(package)
    assert found == [
        "upward: pytest_trt.errors (layer 0) imports pytest_trt.golden (layer 5)",
        "unplaced: pytest_trt.nowhere (add 'nowhere' to a layer in scripts/import_graph.py)",
        "cycle: pytest_trt.backends.a <-> pytest_trt.backends.b",
    ]
