"""docs/ARCHITECTURE.md stays true: its layout names every module, its layers are the import rules, its names import.

The module list comes from walking ``pytest_trt/`` on disk and the layers from ``scripts/import_graph.py``;
the doc is parsed with its own small rules (backticked paths in the "Layout" section, backticked names in the
first column of the "Layers" table), so a module added, renamed or removed without its line fails here.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGE = ROOT / "pytest_trt"
#: the repository's top-level folders the layout must describe
FOLDERS = ("tests/", "examples/", "benchmarks/", "golden/", "scripts/", "docs/")

#: a repository path in backticks: ``pytest_trt/x.py``, ``tests/foundation/``, ``scripts/import_graph.py``
PATH_RE = re.compile(r"`((?:pytest_trt|tests|examples|benchmarks|golden|scripts|docs)(?:/[\w.-]*)*/?)`")
#: a dotted name of the package in backticks, possibly inside a longer span: ``pytest_trt.engines.provider.EngineProvider.get``
NAME_RE = re.compile(r"(?<![\w./])(pytest_trt(?:\.[A-Za-z_]\w*)+)")


def section(text: str, title: str) -> str:
    """The body of the ``## <title>`` section (up to the next ``## `` heading)."""
    match = re.search(rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match is not None, f"docs/ARCHITECTURE.md has no '## {title}' section"
    return match.group(1)


def package_paths(package: Path) -> set[str]:
    """Every module and package of ``package`` as the layout spells it: ``pytest_trt/x.py``, ``pytest_trt/pkg/``."""
    out = set()
    for path in package.rglob("*.py"):
        rel = path.relative_to(package.parent).as_posix()
        out.add(rel[: -len("__init__.py")] if path.name == "__init__.py" else rel)
    out.discard(f"{package.name}/")  # the package root is listed by its __init__.py
    out.add(f"{package.name}/__init__.py")
    return out


def layout_paths(text: str) -> set[str]:
    """The paths the layout gives a line: the first backticked path of each list item."""
    named = set()
    for line in section(text, "Layout").splitlines():
        item = re.match(r"\s*- `([^`]+)`", line)
        if item:
            named.add(item.group(1))
    return named


def doc_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The "Layers" table: per row (in order), the backticked names of its second column."""
    rows: list[tuple[str, ...]] = []
    for line in section(text, "Layers").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].isdigit():
            assert int(cells[0]) == len(rows), f"layer rows out of order at {line!r}"
            rows.append(tuple(re.findall(r"`(\w+)`", cells[1])))
    return tuple(rows)


def picture_layers(text: str) -> tuple[tuple[str, ...], ...]:
    """The mermaid picture of the "Layers" section: per box ``L<n>["<n> <title>: a, b"]``, its module names."""
    block = re.search(r"^```mermaid\n(.*?)^```", section(text, "Layers"), flags=re.M | re.S)
    assert block is not None, "the Layers section of docs/ARCHITECTURE.md has no mermaid picture"
    boxes = re.findall(r'^\s*L(\d+)\["(\d+) [^":]*: ([^"]*)"\]', block.group(1), flags=re.M)
    assert all(a == b for a, b, _ in boxes), boxes
    assert [int(a) for a, _, _ in boxes] == list(range(len(boxes))), "boxes out of order"
    return tuple(tuple(n.strip() for n in names.split(",")) for _, _, names in boxes)


def import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve(dotted: str) -> object:
    """Import the longest importable module prefix of ``dotted``, then getattr the rest; raise if any part is missing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attr):
                raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_layout_names_every_module_and_only_modules_that_exist(doc: str) -> None:
    modules = package_paths(PACKAGE)
    named = {p for p in layout_paths(doc) if p.startswith("pytest_trt/")}
    assert len(modules) > 100  # the walk found the package (about 150 modules)
    missing = sorted(modules - named)
    stale = sorted(named - modules)
    assert missing == [], f"modules with no line in the Layout of docs/ARCHITECTURE.md: {missing}"
    assert stale == [], f"the Layout of docs/ARCHITECTURE.md names modules that do not exist: {stale}"


def test_layout_names_the_top_level_folders(doc: str) -> None:
    named = layout_paths(doc)
    assert [f for f in FOLDERS if f not in named] == []
    assert [f for f in FOLDERS if not (ROOT / f).is_dir()] == []


def test_every_path_the_doc_names_exists(doc: str) -> None:
    paths = {p for p in PATH_RE.findall(doc) if "<" not in p}
    assert len(paths) > 150
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_layers_are_the_import_rules(doc: str) -> None:
    assert doc_layers(doc) == import_graph().LAYERS


#: the two data flows the doc follows, each in at most 15 numbered steps
FLOWS = ("Data flow: a `BuildConfig` to its `Engine`", "Data flow: a test report to its bundle")


@pytest.mark.parametrize("title", FLOWS)
def test_each_data_flow_is_short(doc: str, title: str) -> None:
    steps = [int(n) for n in re.findall(r"^(\d+)\. ", section(doc, title), flags=re.M)]
    assert steps == list(range(1, len(steps) + 1)) and 5 <= len(steps) <= 15, steps


def test_the_layers_picture_shows_the_import_rules(doc: str) -> None:
    assert picture_layers(doc) == import_graph().LAYERS
    moved = doc.replace('L3["3 comparing outputs: compare"]',
                        'L3["3 comparing outputs: compare, golden"]', 1)
    assert moved != doc and picture_layers(moved) != import_graph().LAYERS


def test_every_package_name_in_the_doc_imports(doc: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_trt.backends import registry

    # importing pytest_trt.testing.register_fake registers the fake backend: keep that out of later tests
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    flow = [n for title in FLOWS for n in NAME_RE.findall(section(doc, title))]
    assert len(set(flow)) >= 60  # the data flows name their functions and classes, not prose
    problems = []
    for name in sorted(set(NAME_RE.findall(doc))):
        try:
            resolve(name)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{name}: {exc}")
    assert problems == []


# -- the checks above catch what they are for (the doc's own rules, fed a changed doc or package) -------------------


def test_a_dropped_layout_line_is_caught(doc: str) -> None:
    line = "- `pytest_trt/backends/feeding.py`"
    assert line in doc
    shortened = "\n".join(x for x in doc.splitlines() if not x.strip().startswith(line))
    assert package_paths(PACKAGE) - layout_paths(shortened) == {"pytest_trt/backends/feeding.py"}


def test_a_renamed_module_is_caught(tmp_path: Path, doc: str) -> None:
    copy = tmp_path / "pytest_trt"
    (copy / "buildlog").mkdir(parents=True)
    for rel in ("__init__.py", "errors.py", "buildlog/__init__.py", "buildlog/record_diff.py"):
        (copy / rel).write_text("", encoding="utf-8")
    (copy / "buildlog" / "record_diff.py").rename(copy / "buildlog" / "diff.py")
    named = layout_paths(doc)
    assert package_paths(copy) - named == {"pytest_trt/buildlog/diff.py"}


def test_a_changed_layer_and_a_wrong_name_are_caught(doc: str) -> None:
    moved = doc.replace("| 3 | `compare` |", "| 3 | `compare`, `golden` |", 1)
    assert moved != doc
    assert doc_layers(moved) != import_graph().LAYERS
    with pytest.raises(AttributeError, match="no attribute 'get_engine'"):
        resolve("pytest_trt.engines.provider.EngineProvider.get_engine")
    with pytest.raises(ModuleNotFoundError):
        resolve("pytest_trt_missing.x")
