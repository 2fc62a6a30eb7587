"""The documentation site builds with ``mkdocs build --strict``: a broken link or a page outside the nav fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="mkdocs-material is in the docs extra: pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert "WARNING" not in out.stderr, out.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    for page in ("goldens", "audit", "calibration", "upgrade", "options", "cli", "testing", "backends",
                 "performance", "development", "ARCHITECTURE"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f": {p.name}" not in nav]
    assert not missing, f"pages not in mkdocs.yml's nav: {missing}"
