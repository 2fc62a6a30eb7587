"""The option table: one rule for relative paths, printed commands that paste, every option declared once."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt import options as opt

ROOT = Path(__file__).resolve().parents[2]

SUITE = """
import numpy as np
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset

CFG = BuildConfig(name="cbr", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16)))])
DATA = GoldenDataset.from_arrays({{"input": np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype("f4")}})

@pytest.mark.trt(CFG)
def test_golden(trt_golden, trt_engine):
    trt_golden.check(trt_engine, dataset=DATA)
"""


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:hypothesispytest",
                           "-p", "pytest_trt.testing.register_fake", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_paths_follow_one_rule_and_the_printed_command_pastes_where_pytest_ran(
    tmp_path: Path, models: dict[str, Path]
) -> None:
    """Command-line paths are relative to the current directory, ini paths to the rootdir; the update command
    printed by a run in a subfolder, pasted in that subfolder, writes the golden where the check looks for it.
    Plumbing only: the fake backend of pytest_trt.testing stands in for a build."""
    project = tmp_path / "project"
    sub = project / "tests"
    sub.mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\ntrt_bundle_dir = audit/bundles\n", encoding="utf-8")
    (sub / "test_m.py").write_text(SUITE.format(onnx=str(models["conv_bn_relu"])), encoding="utf-8")
    first = _pytest(sub, "--trt-backend", "fake", "--trt-engine-build", "--trt-golden-dir=../goldens",
                    "--trt-cache-dir", "cache")
    assert first.returncode == 1, first.stdout[-3000:]
    # the cache folder typed on the command line: under the current directory (tests/), not the rootdir
    assert (sub / "cache").is_dir() and not (project / "cache").exists()
    # the bundle folder from the ini: under the rootdir, wherever pytest ran
    assert list((project / "audit" / "bundles").glob("*.tar.gz")) and not (sub / "audit").exists()
    assert str(project / "goldens" / "cbr.h5") in first.stdout
    # one command, printed in the failure and, with CI=true (untruncated summaries), in the summary too
    [command] = {line.strip() for line in first.stdout.splitlines() if line.strip().startswith("pytest test_m.py")}
    words = shlex.split(command)
    assert words[:2] == ["pytest", "test_m.py::test_golden"]
    assert "--trt-golden-dir=../goldens" in words and "--trt-cache-dir=cache" in words
    assert words[words.index("--trt-backend") + 1] == "fake"
    words[words.index("REASON")] = "first approval"
    created = _pytest(sub, *words[1:])
    assert created.returncode == 0, created.stdout[-3000:]
    assert (project / "goldens" / "cbr.h5").is_file() and not (sub / "goldens").exists()
    again = _pytest(sub, "--trt-backend", "fake", "--trt-golden-dir=../goldens", "--trt-cache-dir=cache")
    assert again.returncode == 0, again.stdout[-3000:]  # from the cache, against the golden just written


def test_resolve_expands_home_and_folds_dotdot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert opt.resolve("~/g", tmp_path / "x") == tmp_path / "home" / "g"
    assert opt.resolve("../g", tmp_path / "x") == tmp_path / "g"
    assert opt.resolve(tmp_path / "abs", Path("/elsewhere")) == tmp_path / "abs"


def test_every_option_is_declared_once_with_the_house_names() -> None:
    flags = [o.flag for o in opt.OPTIONS if o.flag]
    inis = [o.ini for o in opt.OPTIONS if o.ini]
    assert len(set(flags)) == len(flags) and len(set(inis)) == len(inis)
    for o in opt.OPTIONS:
        if o.flag and o.ini:
            assert o.flag == "--" + o.ini.replace("_", "-"), o  # --trt-<thing> with ini key trt_<thing>
        assert (o.flag or o.ini or "").lstrip("-").startswith(("trt-", "trt_")), o
        assert o.kind != "choice" or o.default in o.current_choices(), o
    assert opt.PATH_OPTIONS == ("--trt-cache-dir", "--trt-golden-dir", "--trt-approve-report", "--trt-approve-key",
                                "--trt-bundle-dir", "--trt-sign-key", "--trt-pins")


def test_provenance_choices_are_the_policy_modes() -> None:
    from pytest_trt.golden.provenance import COMPARE, POLICY_MODES

    assert opt.PROVENANCE_CHOICES == tuple(POLICY_MODES) and opt.PROVENANCE_OPT.default == COMPARE


def test_options_page_lists_every_option() -> None:
    section = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| option")]
    cells = {c.strip("` ").split(" ")[0] for r in rows for c in r.split("|")[1:3]}
    for o in opt.OPTIONS:
        for name in (o.flag, o.ini):
            assert name is None or name in cells, f"docs/options.md's table misses {name}"
    prose = " ".join(section.split())
    assert "on the command line, to the current directory" in prose and "in the ini file, to the rootdir" in prose  # the relative-path rule is documented


def test_pytest_help_shows_every_flag_and_ini_key(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help", "-p", "no:hypothesispytest")
    out = result.stdout.str()
    for o in opt.OPTIONS:
        for name in (o.flag, o.ini):
            assert name is None or re.search(rf"(^|\s){re.escape(name)}\b", out, re.M), name


def test_update_command_is_built_from_the_table() -> None:
    from pytest_trt.compare.render import update_command

    text = update_command("t.py::test_a", args=(opt.GOLDEN_DIR_OPT.arg("my goldens"), opt.BACKEND_OPT.arg("onnxruntime")))
    assert text == ("pytest t.py::test_a --trt-golden-dir='my goldens' --trt-backend onnxruntime --trt-engine-build "
                    '--trt-update-golden --trt-approve "REASON"')
    assert shlex.split(text)[2] == "--trt-golden-dir=my goldens"


def test_catalog_cli_reads_the_table() -> None:
    from pytest_trt.cli import build_parser

    args = build_parser().parse_args(["catalog", "push", "--uri", "http://h:1"])
    assert args.db == Path(opt.DEFAULT_BUNDLE_DIR) / "catalog.sqlite" and args.register is False
    assert textwrap.dedent(opt.MLFLOW_URI_OPT.metavar or "") == "URI"


def test_backend_choices_are_read_from_the_registry_when_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend registered after pytest-trt was imported (a ``-p`` plugin) is a valid --trt-backend."""
    import argparse

    from pytest_trt import options as opt
    from pytest_trt.backends import registry

    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    assert "late-toy" not in opt.BACKEND_OPT.current_choices()
    registry.register(registry.BackendSpec(name="late-toy", module="json", distributions=("pytest",), extra="x",
                                           slug="lt", auto_rank=98, factory="json:loads", title="toy"))
    assert opt.BACKEND_OPT.current_choices()[-1] == "late-toy"
    parser = argparse.ArgumentParser()
    opt.add_argument(parser, opt.BACKEND_OPT)
    assert parser.parse_args(["--trt-backend", "late-toy"]).trt_backend == "late-toy"


def test_create_command_keeps_the_bundle_dir(tmp_path: Path, models: dict[str, Path]) -> None:
    """The "no golden" command printed by a run with --trt-bundle-dir repeats it: pasted, the approval run's bundles go
    to the same folder, not to the default trt-bundles/."""
    (tmp_path / "test_m.py").write_text(SUITE.format(onnx=str(models["conv_bn_relu"])), encoding="utf-8")
    first = _pytest(tmp_path, "--trt-backend", "fake", "--trt-engine-build", "--trt-cache-dir=cache",
                    "--trt-golden-dir=goldens", "--trt-bundle-dir=runs/new")
    assert first.returncode == 1, first.stdout[-3000:]
    [command] = {line.strip() for line in first.stdout.splitlines() if line.strip().startswith("pytest test_m.py")}
    words = shlex.split(command)
    assert "--trt-bundle-dir=runs/new" in words, command
    words[words.index("REASON")] = "first approval"
    shutil.rmtree(tmp_path / "runs")
    created = _pytest(tmp_path, *words[1:])
    assert created.returncode == 0, created.stdout[-3000:]
    assert list((tmp_path / "runs" / "new").glob("*.tar.gz")) and not (tmp_path / "trt-bundles").exists()
