"""Under ``--dist loadgroup`` every test of one BuildConfig runs in one xdist worker, so each config's engine is
loaded by one worker; a test's own ``xdist_group`` mark is kept.  Plumbing only: the fake backend of
pytest_trt.testing builds the engines."""

from __future__ import annotations

import re
from collections import defaultdict

FAKE = ("-p", "no:cacheprovider", "-p", "pytest_trt.testing.register_fake", "--trt-backend", "fake")

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

PROFILE = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
A = BuildConfig(name="cbr_a", version="1.0", onnx={onnx!r}, profiles=PROFILE)
B = BuildConfig(name="cbr_b", version="2.0", onnx={onnx!r}, profiles=PROFILE)

@pytest.mark.parametrize("i", range(4))
@pytest.mark.trt(A)
def test_a(trt_engine, i):
    pass

@pytest.mark.parametrize("i", range(4))
@pytest.mark.trt(B)
def test_b(trt_engine, i):
    pass

@pytest.mark.xdist_group(name="mine")
@pytest.mark.trt(B)
def test_b_grouped_by_its_author(trt_engine):
    pass

def test_plain():
    pass
"""


MARKS = """
import sys

def pytest_collection_finish(session):
    if hasattr(session.config, "workerinput"):
        for item in session.items:
            groups = [m.kwargs.get("name", m.args[0] if m.args else None) for m in item.iter_markers("xdist_group")]
            print("GROUPS", session.config.workerinput["workerid"], item.nodeid, *groups, file=sys.stderr)
"""


def _groups(stderr: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """worker -> nodeid -> the xdist_group names of the test, as each worker collected it."""
    found: dict[str, dict[str, tuple[str, ...]]] = defaultdict(dict)
    for line in stderr.splitlines():
        if line.startswith("GROUPS "):
            worker, nodeid, *names = line.split()[1:]
            found[worker][nodeid] = tuple(names)
    return found


def _workers(stdout: str) -> dict[str, str]:
    """nodeid -> the worker that ran it, from ``-v`` lines ``[gw0] PASSED id`` (without xdist's ``@group``)."""
    return {m.group(2).partition("@")[0]: m.group(1)
            for m in re.finditer(r"^\[(gw\d+)\] [^\n]*?PASSED (\S+)", stdout, re.M)}


def test_loadgroup_marks_one_group_per_config_in_every_worker(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(MARKS)
    result = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=10)
    seen = _groups(result.stderr.str())
    assert sorted(seen) == ["gw0", "gw1"] and seen["gw0"] == seen["gw1"]  # both workers name the same groups
    marks = seen["gw0"]
    a = {marks[f"test_model.py::test_a[{i}]"] for i in range(4)}
    b = {marks[f"test_model.py::test_b[{i}]"] for i in range(4)}
    assert len(a) == len(b) == 1 and a != b
    ((name_a,),), ((name_b,),) = a, b
    assert name_a.startswith("trt-") and name_b.startswith("trt-")
    assert marks["test_model.py::test_b_grouped_by_its_author"] == ("mine",)  # its author's grouping kept
    assert marks["test_model.py::test_plain"] == ()  # not a trt test

    ran = _workers(result.stdout.str())
    if not any("@mine" in line for line in result.stdout.lines):
        # pytest-xdist writes the group into the node id, which pytest 9.2 no longer lets it change, so no
        # group is scheduled together, an author's own included
        return
    assert len({ran[f"test_model.py::test_a[{i}]"] for i in range(4)}) == 1
    assert len({ran[f"test_model.py::test_b[{i}]"] for i in range(4)}) == 1


def test_without_loadgroup_no_group_is_added(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(MARKS)
    result = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build", "-n", "2", "-v")
    result.assert_outcomes(passed=10)
    marks = _groups(result.stderr.str())["gw0"]
    assert marks["test_model.py::test_a[0]"] == () and marks["test_model.py::test_b_grouped_by_its_author"] == ("mine",)
