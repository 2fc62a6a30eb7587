"""The package's import rules, checked by walking every module's imports (tests/foundation/test_import_graph.py).

Rules:

1. Layers.  Every top-level module or subpackage of ``pytest_trt`` belongs to one layer
   (:data:`LAYERS`, lowest first); a module may import its own layer or a lower one, never a higher one.
   Function-level (lazy) imports count: a lazy import is still a dependency.  So do imports under
   ``if TYPE_CHECKING:``: a type from a higher layer is a dependency on that layer.
2. No cycles.  The module graph (same counting) has no cycle.
3. Every module is placed: a new top-level module or subpackage must be added to a layer here.

``pytest_trt/__init__.py`` (the public facade, which re-exports by name on first use) is the one
module allowed to name anything; it is not checked, and no other module may import it (4. below).

4. No import of the facade.  A name the package's modules share (the version, the lazy re-export helper)
   lives in a module of its layer, not in ``pytest_trt/__init__.py``.

Run ``python scripts/import_graph.py`` for the violations of the tree it lives in.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

#: lowest first; a module may import from its own layer and the layers before it
LAYERS: tuple[tuple[str, ...], ...] = (
    # 0 foundations: no pytest_trt imports beyond this layer
    ("errors", "common"),
    # 1 what a build is made of and what its log says
    ("artifact", "config", "calibration", "buildlog"),
    # 2 the backends that build and run engines, and the option table that names them
    ("backends", "options"),
    # 3 comparing outputs
    ("compare",),
    # 4 engines for tests: provider, cache, the Engine object and its assertions
    ("engines", "strategies"),
    # 5 golden snapshots
    ("golden",),
    # 6 audit bundles
    ("audit",),
    # 7 reading many bundles and goldens: upgrade review, catalog, the output monitor (its runtime, which a
    #   service embeds, imports compare and numpy only; its commands read goldens), INT8 sensitivity
    ("upgrade", "catalog", "monitor", "sensitivity"),
    # 8 front ends: the pytest plugin and the command line
    ("plugin", "pytest_plugin", "cli", "testing"),
)


def _layer_of() -> dict[str, int]:
    return {name: i for i, names in enumerate(LAYERS) for name in names}


def _modules(package: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, strict: bool = True) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if not strict and isinstance(node, ast.If) and _is_type_checking(node.test):
            for sub in node.orelse:
                yield from _imports(ast.Module(body=[sub], type_ignores=[]), strict)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node, strict)


def edges(package: Path, strict: bool = True) -> dict[str, set[str]]:
    """module -> the ``pytest_trt`` modules it imports (lazy and TYPE_CHECKING imports included unless not strict)."""
    mods = _modules(package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), strict):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [f"{name}.{a.name}" for a in node.names]
            for target in targets:
                # "import a.b.c" depends on a.b.c; a name imported from a package is that package unless a submodule
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    graph[mod].add(target)
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(package: Path, strict: bool = True) -> list[str]:
    """Every broken rule, one line each (empty when the package is clean)."""
    layer = _layer_of()
    graph = edges(package, strict)
    facade = package.name
    graph.pop(facade, None)
    out: list[str] = []
    for mod in sorted(graph):
        if facade in graph[mod]:
            out.append(f"facade: {mod} imports {facade} itself (the public face sits above every layer: "
                       "import from the defining module)")
            graph[mod].discard(facade)
    for mod in sorted(graph):
        top = _top(mod)
        if top not in layer:
            out.append(f"unplaced: {mod} (add {top!r} to a layer in scripts/import_graph.py)")
            continue
        for target in sorted(graph[mod]):
            t = _top(target)
            if t in layer and layer[t] > layer[top]:
                out.append(f"upward: {mod} (layer {layer[top]}) imports {target} (layer {layer[t]})")
    for comp in _cycles(graph):
        out.append("cycle: " + " <-> ".join(comp))
    return out


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--lenient"]
    package = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "pytest_trt"
    found = violations(package, strict="--lenient" not in sys.argv)
    for line in found:
        print(line)
    print(f"{len(found)} violation(s) in {package}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
