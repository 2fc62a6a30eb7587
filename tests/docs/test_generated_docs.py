"""docs/options.md and docs/cli.md hold generated regions: they must be what scripts/gen_docs.py makes today."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gen_docs():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_current() -> None:
    stale = _gen_docs().stale_pages()
    diffs = ["".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"docs/{page} (committed)",
                                          f"docs/{page} (generated)")) for page, (old, new) in stale.items()]
    assert not stale, "run python scripts/gen_docs.py\n" + "\n".join(diffs)


def test_the_cli_page_names_every_command() -> None:
    from pytest_trt.cli import build_parser

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    gen = _gen_docs()
    for path, _, _ in gen._leaves(build_parser()):
        assert f"## pytest-trt {' '.join(path)} " in text, path
