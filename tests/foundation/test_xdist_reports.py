"""Under pytest-xdist a worker's test reports reach the controller with their user properties and sections as a
serial run has them: pytest-trt packs both into one JSON string in the worker (execnet serializes a string in a few
calls) and unpacks it in the controller.  Plumbing only: the fake backend of pytest_trt.testing builds the engines."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_trt.pytest_plugin.channel import REPORT_KEY, WorkerOutput, pack_report, unpack_report

FAKE = ("-p", "no:cacheprovider", "-p", "pytest_trt.testing.register_fake", "--trt-backend", "fake",
        "--trt-engine-build")

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_scalars(trt_engine, record_property):
    record_property("count", 3)
    record_property("ratio", 0.1)
    record_property("none", None)
    record_property("flag", True)
    print("printed by the test")

@pytest.mark.trt(CFG)
def test_a_list(trt_engine, record_property):
    record_property("shape", [1, 3])

def test_plain(record_property):
    record_property("plain", "yes")
"""


def _properties(xml_path: Path) -> dict[str, list[tuple[str, str]]]:
    return {case.get("name"): [(p.get("name"), p.get("value")) for p in case.iter("property")]
            for case in ET.parse(xml_path).iter("testcase")}


#: the controller's view of each call report, before pytest-trt's unpacking (an outer wrapper of the same hook)
SEEN = """
import sys
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_report_from_serializable(config, data):
    if data.get("when") == "call":
        sys.stderr.write(f"PACKED {data['nodeid']} {'pytest_trt_packed' in data} {len(data['user_properties'])} "
                         f"{'trt' in data['keywords']}\\n")
    return (yield)


WORKER = []


def pytest_configure(config):
    WORKER.append(hasattr(config, "workerinput"))


def pytest_runtest_logreport(report):
    side = "WORKER" if WORKER[0] else "KEYWORD"  # a worker's report keeps its keyword after it was sent
    sys.stderr.write(f"{side} {report.nodeid} {report.when} {report.keywords.get('trt')}\\n")
"""


def _run(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, list[tuple[str, str]]], str]:
    result = pytester.runpytest_subprocess(*FAKE, *args, "--junitxml=junit.xml", "-rP")
    result.assert_outcomes(passed=3)
    return _properties(pytester.path / "junit.xml"), result.stdout.str() + result.stderr.str()


def test_properties_and_sections_cross_to_the_controller_as_in_a_serial_run(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    pytester.makeconftest(SEEN)
    serial, serial_out = _run(pytester)
    workers, workers_out = _run(pytester, "-n", "2")
    assert workers == serial
    packed = sorted(m.split() for m in re.findall(r"PACKED (\S+ \S+ \d+ \S+)", workers_out))
    assert packed == [["test_model.py::test_a_list", "False", "6", "True"],  # a list value: sent as it is
                      ["test_model.py::test_plain", "True", "0", "False"],
                      ["test_model.py::test_scalars", "True", "0", "False"]]  # the trt keyword rode in the string
    keyword = r"KEYWORD (\S+ \S+ \S+)"
    assert sorted(re.findall(keyword, workers_out)) == sorted(re.findall(keyword, serial_out))  # as a serial run's
    assert sorted(re.findall(r"WORKER (\S+ \S+ \S+)", workers_out)) == sorted(re.findall(keyword, serial_out))
    assert sorted(re.findall(keyword, serial_out)) == sorted(
        f"test_model.py::{name} {when} {value}" for name, value in (("test_scalars", 1), ("test_a_list", 1),
                                                                   ("test_plain", None))
        for when in ("setup", "call", "teardown"))
    scalars = workers["test_scalars"]
    assert scalars[:4] == [("count", "3"), ("ratio", "0.1"), ("none", "None"), ("flag", "True")]
    assert [name for name, _ in scalars[4:]] == ["trt_bundle", "trt_bundle_sha256", "trt_config_hash",
                                                  "trt_backend", "trt_backend_version"]
    assert workers["test_a_list"][0] == ("shape", "[1, 3]")  # not packable: sent as it is
    assert workers["test_plain"] == [("plain", "yes")]
    for out in (serial_out, workers_out):
        for name in ("test_scalars", "test_a_list"):
            block = out.split(f"_ {name} _", 1)[1].split("\n_", 1)[0]  # the test's -rP block
            assert "Captured trt audit call" in block and "engine: cbr v1.0" in block, block
        assert "printed by the test" in out.split("_ test_scalars _", 1)[1].split("\n_", 1)[0]


def _worker_report() -> dict:
    return {"$report_type": "TestReport", "nodeid": "t.py::t", "when": "call",
            "keywords": {"t": 1, "trt": 1, "t.py": 1},
            "user_properties": [("count", 3), ("trt_bundle", "/b/x.tar.gz"), ("ratio", 0.5), ("none", None)],
            "sections": [("Captured stdout call", "out\n"), ("trt audit", "engine: cbr v1.0\n")]}


def test_pack_makes_one_string_and_unpack_gives_the_same_pairs():
    data = _worker_report()
    pack_report(data)
    assert data["user_properties"] == [] and data["sections"] == [] and isinstance(data[REPORT_KEY], str)
    assert data["keywords"] == {"t": 1, "t.py": 1}  # the trt keyword rides in the string
    unpack_report(data)
    assert data == _worker_report()
    assert all(type(p) is tuple for p in data["user_properties"] + data["sections"])


@pytest.mark.parametrize("prop", [("shape", [1, 3]), ("t", (1, 2)), (1, "x"), ("x", b"bytes"), ["x", "y"]])
def test_a_value_json_would_change_leaves_the_report_as_it_is(prop):
    data = _worker_report()
    data["user_properties"].append(prop)
    pack_report(data)
    assert REPORT_KEY not in data and data["user_properties"][-1] == prop and len(data["sections"]) == 2


def test_a_report_without_trt_keyword_packs_none():
    data = _worker_report()
    del data["keywords"]["trt"]
    pack_report(data)
    assert len(json.loads(data[REPORT_KEY])) == 2
    unpack_report(data)
    assert data["keywords"] == {"t": 1, "t.py": 1}


def test_a_report_without_properties_or_sections_is_left_alone():
    data = {"$report_type": "TestReport", "user_properties": [], "sections": [], "keywords": {"trt": 1}}
    pack_report(data)
    assert data == {"$report_type": "TestReport", "user_properties": [], "sections": [], "keywords": {"trt": 1}}
    unpack_report(data)  # nothing packed: nothing to do
    assert REPORT_KEY not in data


def test_worker_output_crosses_as_one_string_and_comes_back_equal():
    out = WorkerOutput(engines=[{"name": "cbr", "build_s": 1.5, "layers": 3}], cache_errors=["e"],
                       bundles=[{"path": "/b/x.tar.gz", "attested": {"written": True, "signed": False}}],
                       bundle_failures=["f"], golden_refreshed=[("t.py::a", "values")],
                       golden_notes=[("t.py::b", "note")])
    doc: dict = {}
    out.send(doc)
    assert list(doc) == ["pytest_trt"] and isinstance(doc["pytest_trt"], str)
    assert WorkerOutput.received(doc) == out
    assert WorkerOutput.received({}) == WorkerOutput()
