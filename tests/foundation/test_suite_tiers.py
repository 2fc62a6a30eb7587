"""The suite's two tiers: ``pytest tests/`` runs the default tier, the heavy tier (tests/conftest.py ``HEAVY``) runs with
``PYTEST_TRT_HEAVY=1`` or ``-m heavy``, and CI (.ci/run) runs both, after the README's command, with the extras the
heavy tier needs; the ``[test]`` extra holds no full mlflow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import HEAVY

ROOT = Path(__file__).resolve().parents[2]


def _collected(*args: str, heavy_env: bool = False) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_TRT_HEAVY"}
    if heavy_env:
        env["PYTEST_TRT_HEAVY"] = "1"
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return {line for line in out.stdout.splitlines() if line.startswith("tests/") and "::" in line}


def test_the_default_tier_leaves_out_exactly_the_heavy_tests() -> None:
    default = _collected()
    heavy = _collected("-m", "heavy", heavy_env=True)
    assert [p for p in HEAVY if not any(t.startswith(p) for t in heavy)] == [], "these HEAVY prefixes name no test"
    assert all(t.startswith(HEAVY) for t in heavy)
    assert default and not [t for t in default if t.startswith(HEAVY)]


def test_ci_runs_the_readme_command_then_the_heavy_tier_with_its_extras() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.startswith("python -m pip install -e")]
    assert len(ci) == 2 and ci[0] in readme  # the README's command first, as it is
    assert ci[0] == "python -m pip install -e '.[test]' && python -m pytest tests/ -n auto"
    assert ci[1] == ("python -m pip install -e '.[test,test-server,docs]' && "
                     "PYTEST_TRT_HEAVY=1 python -m pytest tests/ -m heavy -n auto")
    development = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    assert ci[0] in development and ci[1] in development


def test_the_test_extra_holds_no_full_mlflow() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip().lower() for req in extras["test"]}
    assert "mlflow" not in names and "matplotlib" not in names and "mlflow-skinny" in names
    assert any(req.startswith("mlflow>") for req in extras["test-server"])
