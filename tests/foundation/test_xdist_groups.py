"""Under ``--dist loadgroup`` every test of one BuildConfig runs in one xdist worker, so each config's engine is
loaded by one worker; a test's own ``xdist_group`` mark is kept, and a config with one test is not grouped.
Plumbing only: the fake backend of pytest_trt.testing builds the engines.  Which worker ran a test is read from
xdist's ``-v`` lines and from a file each test appends its own ``PYTEST_XDIST_WORKER`` to."""

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

C1 = BuildConfig(name="cbr_c", version="3.0", onnx={onnx!r}, profiles=PROFILE)
C2 = BuildConfig(name="cbr_c", version="3.0", onnx={onnx!r}, profiles=PROFILE)  # equal to C1: another object
D = BuildConfig(name="cbr_d", version="4.0", onnx={onnx!r}, profiles=PROFILE)
E1 = BuildConfig(name="cbr_e", version="5.0", onnx={onnx!r}, profiles=PROFILE)
E2 = BuildConfig(name="cbr_e", version="5.0", onnx={onnx!r},  # the same name and version, another config
                 profiles=[Profile(input=((1, 3, 16, 16), (1, 3, 16, 16), (1, 3, 16, 16)))])

@pytest.mark.trt(C1)
def test_c1(trt_engine):
    pass

@pytest.mark.trt(C2)
def test_c2(trt_engine):
    pass

@pytest.mark.trt(D)
def test_d_alone(trt_engine):
    pass

@pytest.mark.trt(E1)
def test_e1_alone(trt_engine):
    pass

@pytest.mark.trt(E2)
def test_e2_alone(trt_engine):
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


def test_loadgroup_marks_one_group_per_config_in_every_worker(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(MARKS)
    result = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build", "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=15)
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
    ((name_c,),) = {marks["test_model.py::test_c1"], marks["test_model.py::test_c2"]}  # equal configs: one group
    assert name_c.startswith("trt-") and name_c not in (name_a, name_b)
    assert marks["test_model.py::test_d_alone"] == ()  # a config's only test is one unit of work already
    assert marks["test_model.py::test_e1_alone"] == marks["test_model.py::test_e2_alone"] == ()  # two configs



def test_without_loadgroup_no_group_is_added(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(MARKS)
    result = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build", "-n", "2", "-v")
    result.assert_outcomes(passed=15)
    marks = _groups(result.stderr.str())["gw0"]
    assert marks["test_model.py::test_a[0]"] == () and marks["test_model.py::test_b_grouped_by_its_author"] == ("mine",)


GROUPED = """
import os
import pytest
from pathlib import Path
from pytest_trt import BuildConfig, Profile

PROFILE = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
CONFIGS = {{n: BuildConfig(name=f"cbr_{{n}}", version="1.0", onnx={onnx!r}, profiles=PROFILE) for n in "abc"}}

def ran(request):
    with open(Path(__file__).parent / "ran.txt", "a") as fh:
        fh.write(f"{{request.node.nodeid}} {{os.environ.get('PYTEST_XDIST_WORKER', 'serial')}}\\n")

@pytest.mark.parametrize("i", range(4))
@pytest.mark.trt(CONFIGS["a"])
def test_a(trt_engine, request, i):
    ran(request)

@pytest.mark.parametrize("i", range(4))
@pytest.mark.trt(CONFIGS["b"])
def test_b(trt_engine, request, i):
    ran(request)
    assert i != 2  # one failure: the same outcome with and without workers

@pytest.mark.parametrize("i", range(4))
@pytest.mark.trt(CONFIGS["c"])
def test_c(trt_engine, request, i):
    ran(request)

@pytest.mark.xdist_group(name="mine")
@pytest.mark.trt(CONFIGS["a"])
def test_mine_a(trt_engine, request):
    ran(request)

@pytest.mark.xdist_group(name="mine")
@pytest.mark.trt(CONFIGS["c"])
def test_mine_c(trt_engine, request):
    ran(request)

@pytest.mark.parametrize("i", range(4))
def test_plain(request, i):
    ran(request)
"""


def _ran(path) -> list[tuple[str, str]]:
    """(test id, worker) for every test run, as the tests themselves wrote it."""
    return [tuple(line.split()) for line in path.read_text().splitlines()]  # type: ignore[misc]


def test_loadgroup_runs_each_config_in_one_worker_and_every_test_once(pytester, models, monkeypatch):
    pytester.makepyfile(test_model=GROUPED.format(onnx=str(models["conv_bn_relu"])))
    serial = pytester.runpytest_subprocess(*FAKE, "--trt-engine-build")
    serial.assert_outcomes(passed=17, failed=1)
    expected = sorted(nodeid for nodeid, _ in _ran(pytester.path / "ran.txt"))
    (pytester.path / "ran.txt").unlink()

    tmp = pytester.mkdir("tmp")  # the controller's groups folder is made under TMPDIR and removed at the end
    monkeypatch.setenv("TMPDIR", str(tmp))
    result = pytester.runpytest_subprocess(*FAKE, "-n", "2", "--dist", "loadgroup", "-v")
    result.assert_outcomes(passed=17, failed=1)  # the results of the serial run
    ran = _ran(pytester.path / "ran.txt")
    assert sorted(nodeid for nodeid, _ in ran) == expected and len(expected) == 18  # every test exactly once
    worker = dict(ran)
    assert {m.group(2): m.group(1) for m in re.finditer(r"^\[(gw\d+)\] [^\n]*?(?:PASSED|FAILED) (\S+)",
                                                        result.stdout.str(), re.M)} == worker  # xdist's report
    for name in "abc":
        assert len({worker[f"test_model.py::test_{name}[{i}]"] for i in range(4)}) == 1, name  # one worker a config
    assert worker["test_model.py::test_mine_a"] == worker["test_model.py::test_mine_c"]  # its author's group
    assert set(worker.values()) == {"gw0", "gw1"}  # the groups are spread over both workers
    assert list(tmp.iterdir()) == []
