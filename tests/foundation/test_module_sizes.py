"""Modules of one idea: no module of the package over 400 lines, no function over 80 without its reason.

A function may run longer only when its docstring says why, in a sentence that begins "Over 80 lines because".
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_trt"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
REASON = "Over 80 lines because"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_package_is_measured() -> None:
    assert len(_modules()) > 150  # the whole package, not an empty glob


def test_no_module_over_400_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"split these modules by idea (at most {MAX_MODULE_LINES} lines each): {long}"


def test_no_function_over_80_lines_without_its_reason() -> None:
    long = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and REASON not in (ast.get_docstring(node) or ""):
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == [], f"shorten these, or say why in the docstring ({REASON} ...): {long}"
