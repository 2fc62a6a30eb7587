"""A TensorRT 7 fusion with an unnamed layer (``Fusing (Unnamed Layer* 59) [ElementWise] with Relu_54``) is a
fusion for ``log parse``, ``log diff`` and the assertions alike.  The log lines are 7.1.3's (NOTES §fusion);
the unnamed ElementWise line has the shape of the corpus' 10.14.1 line ``EltReluFusion: Fusing
(Unnamed Layer* 11) [ElementWise] with node_relu_2``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.buildlog import read_log
from pytest_trt.buildlog.assertions import assert_fused

HEAD = """[02/18/2021-11:57:18] [I] TensorRT version: 7.1.3
[02/18/2021-11:57:18] [V] [TRT] Original: 60 layers
[02/18/2021-11:57:18] [V] [TRT] Fusing Conv_3 with Relu_4
[02/18/2021-11:57:18] [V] [TRT] Fusing Conv_0 with Relu_1
"""
UNNAMED = "[02/18/2021-11:57:18] [V] [TRT] Fusing (Unnamed Layer* 59) [ElementWise] with Relu_54\n"
TAIL = """[02/18/2021-11:57:18] [V] [TRT] Merging layers: Conv_3 + Relu_4 || Conv_0 + Relu_1
[02/18/2021-11:57:18] [V] [TRT] After vertical fusions: 57 layers
"""


@pytest.fixture
def logs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "trt7a.log", tmp_path / "trt7b.log"
    a.write_text(HEAD + UNNAMED + TAIL)
    b.write_text(HEAD + TAIL)
    return a, b


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_log_parse_counts_the_unnamed_fusion(logs: tuple[Path, Path]) -> None:
    run = _cli("log", "parse", logs[0])
    # two fusion groups: {Conv_0, Relu_1, Conv_3, Relu_4} (merged horizontally) and {unnamed, Relu_54}
    assert "fusions: 2," in run.stdout, run.stdout


def test_log_diff_sees_the_lost_unnamed_fusion(logs: tuple[Path, Path]) -> None:
    run = _cli("log", "diff", logs[0], logs[1])
    assert run.returncode == 1
    assert "fusions lost (1):\n  (Unnamed Layer) [ElementWise] + Relu_54" in run.stdout, run.stdout


def test_assert_fused_names_the_unnamed_layer(logs: tuple[Path, Path]) -> None:
    assert_fused(read_log(logs[0]), "Relu_54", "(Unnamed Layer* 59) [ElementWise]")
    with pytest.raises(AssertionError):
        assert_fused(read_log(logs[1]), "Relu_54", "(Unnamed Layer* 59) [ElementWise]")


def test_unnamed_helpers_alone_are_no_fusion(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    log.write_text(HEAD + "[02/18/2021-11:57:18] [V] [TRT] Fusing (Unnamed Layer* 3) [Shuffle] with "
                   "(Unnamed Layer* 4) [ElementWise]\n" + TAIL)
    assert "fusions: 1," in _cli("log", "parse", log).stdout
