"""Every fenced code block of README.md and docs/*.md runs, for real, in a folder outside the repository.

Each block carries its role in an HTML comment on the line before it (docs/development.md, "Snippets"):

    <!-- snippet: file tests/test_golden.py -->   write the block to that path of the page's project
    <!-- snippet: run -->                         run each command (lines with `$ `, else every line); exit 0
    <!-- snippet: run exit=1,0 -->                the expected exit code of each command, in order
    <!-- snippet: run in=clone -->                run in a copy of the repository instead (development pages)
    <!-- snippet: output -->                      what a command prints: shown, not run
    <!-- snippet: skip REASON -->                 not run, for the reason given
    <!-- snippet: picture -->                     a mermaid diagram the site draws (its test checks what it shows)

A block without a role fails the test, so no snippet escapes.  The blocks of one page run in order in
one project folder: a copy of examples/, the example models in models/ (examples/models.py) plus a user
classifier models/my_model.onnx, a golden dataset in golden_data/, an empty pytest.ini, and an engine
cache shared by every page.  `pytest`, `pytest-trt` and `python` are this interpreter's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ROLES = ("file", "run", "output", "skip", "picture")
ROLE = re.compile(r"^\s*<!--\s*snippet:\s*(?P<role>\S+)\s*(?P<arg>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
TIMEOUT = 300


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    info: str
    role: str | None
    arg: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        body = "\n".join(line[indent:] for line in lines[i + 1 : j]) + "\n"
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        role = ROLE.match(lines[k]) if k >= 0 else None
        out.append(Block(page, i + 1, m["info"].strip(), role["role"] if role else None,
                         role["arg"] if role else "", body))
        i = j + 1
    return out


def commands(block: Block) -> list[str]:
    """The block's commands: `$ ` lines of a console transcript, else every line; `\\` continues a line."""
    text = block.body.replace("\\\n", " ")
    lines = text.splitlines()
    if any(line.startswith("$ ") for line in lines):
        return [line[2:] for line in lines if line.startswith("$ ")]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _options(arg: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in arg.split() if "=" in word)


# -- the project a page's blocks run in ----------------------------------------------------------


def user_model(path: Path) -> Path:
    """A user's own classifier: input (N, 3, 64, 64) -> GlobalAveragePool -> 10 logits."""
    w = np.random.default_rng(5).standard_normal((3, 10)).astype(np.float32)
    nodes = [helper.make_node("GlobalAveragePool", ["input"], ["pooled"], name="pool"),
             helper.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
             helper.make_node("MatMul", ["flat", "w"], ["logits"], name="fc")]
    graph = helper.make_graph(nodes, "user", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                            ["N", 3, 64, 64])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


def _shims(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in (("python", ""), ("pytest", "-m pytest"), ("pytest-trt", "-m pytest_trt.cli")):
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {target} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return folder


def make_project(folder: Path, cache: Path) -> Path:
    from examples.models import write_all

    shutil.copytree(ROOT / "examples", folder / "examples",
                    ignore=shutil.ignore_patterns("models", "generated", "__pycache__"))
    write_all(folder / "models")
    user_model(folder / "models" / "my_model.onnx")
    data = folder / "golden_data"
    data.mkdir()
    rng = np.random.default_rng(11)
    np.save(data / "input.npy", rng.random((24, 3, 64, 64), dtype=np.float32) - 0.5)
    np.save(data / "labels.npy", np.arange(24) % 10)
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (folder / ".trt_cache").symlink_to(cache, target_is_directory=True)
    return folder


def make_clone(folder: Path) -> Path:
    skip = shutil.ignore_patterns(".git", ".venv", ".ci-venv", ".tox", "__pycache__", ".trt_cache", "trt-bundles",
                                  ".pytest_cache", ".hypothesis", ".mypy_cache", ".ruff_cache", "site", "*.egg-info",
                                  "upgrade-runs", "models", "generated")
    shutil.copytree(ROOT, folder, ignore=skip)
    return folder


class Runner:
    def __init__(self, tmp: Path, cache: Path) -> None:
        self.tmp, self.cache = tmp, cache
        self.bin = _shims(tmp / "bin")
        self.project = make_project(tmp / "project", cache)
        self._clone: Path | None = None

    def clone(self) -> Path:
        if self._clone is None:
            self._clone = make_clone(self.tmp / "clone")
        return self._clone

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_ADDOPTS", "PYTEST_XDIST", "COV_"))}
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(ROOT), env.get("PYTHONPATH", "")] if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def file(self, block: Block) -> None:
        path = self.project / block.arg
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.body, encoding="utf-8")

    def run(self, block: Block) -> None:
        opts = _options(block.arg)
        cwd = self.clone() if opts.get("in") == "clone" else self.project
        cmds = commands(block)
        expected = [int(x) for x in opts["exit"].split(",")] if "exit" in opts else [0] * len(cmds)
        assert len(expected) == len(cmds), f"{block.where}: exit= gives {len(expected)} codes for {len(cmds)} commands"
        for cmd, code in zip(cmds, expected, strict=True):
            out = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=self.env(), capture_output=True, text=True,
                                 timeout=TIMEOUT)
            assert out.returncode == code, (f"{block.where}: `{cmd}` exited {out.returncode}, expected {code}\n"
                                            f"--- stdout\n{out.stdout[-5000:]}\n--- stderr\n{out.stderr[-3000:]}")


# -- tests --------------------------------------------------------------------------------------


def test_every_block_has_a_role() -> None:
    problems = []
    for page in PAGES:
        for b in blocks(page):
            if b.role not in ROLES:
                problems.append(f"{b.where}: no role (<!-- snippet: file PATH | run | output | skip REASON | picture -->)"
                                if b.role is None else f"{b.where}: unknown role {b.role!r}")
            elif b.role in ("file", "skip") and not b.arg:
                problems.append(f"{b.where}: {b.role} needs {'a path' if b.role == 'file' else 'a reason'}")
            elif (b.role == "picture") != (b.info == "mermaid"):
                problems.append(f"{b.where}: a mermaid block is a picture, and a picture is a mermaid block")
    assert not problems, "\n".join(problems)


def test_readme_test_command_is_the_one_ci_runs() -> None:
    command = "python -m pip install -e '.[test]' && python -m pytest tests/ -n auto"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in readme.splitlines() and command in ci


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("snippet-cache")


RUNNABLE = [p for p in PAGES if any(b.role in ("file", "run") for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE])
def test_page_snippets_run(page: Path, tmp_path: Path, shared_cache: Path) -> None:
    pytest.importorskip("onnxruntime")
    runner = Runner(tmp_path, shared_cache)
    for block in blocks(page):
        if block.role == "file":
            runner.file(block)
        elif block.role == "run":
            runner.run(block)
