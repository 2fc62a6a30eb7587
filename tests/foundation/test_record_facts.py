"""A cache hit's test report reads the build's facts stored with its record, without making the record.

The 50-test suite from the cache: the audit section of every test report shows the engine's
fusion count and layers per precision.  On a cache hit these come from ``record.json`` (``facts``, written
with the record), so the record classes are not even imported; a record stored without them (an earlier
release) or a stale one falls back to the record itself.  Expected numbers are counted from the log text
with a regular expression, independently of the parser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_trt.buildlog.summary import read_log_record
from pytest_trt.engines.record_store import RECORD_FILE, load_facts, save_record
from tests.conftest import needs_rtx

LOG = Path(__file__).resolve().parents[1] / "data" / "trt_logs" / "log_rtx1.7.1_mobilenet_v2_detailed.txt"


def _counted_from_the_log(log: Path = LOG) -> dict[str, object]:
    """Fusions and compute layers counted from a TensorRT-RTX DETAILED log's text (every layer is Float here)."""
    text = log.read_text()
    origins = [len(re.findall(r"\[ONNX Layer: ", line)) for line in text.splitlines()
               if "Metadata: [ONNX Layer: " in line]
    listed = len(re.findall(r"LayerType: ", text))  # one per engine layer in the DETAILED listing
    return {"layers": listed, "fusions": sum(1 for n in origins if n >= 2), "precisions": {"Float": len(origins)}}


def test_the_facts_of_a_real_log_match_a_count_of_its_lines() -> None:
    expected = _counted_from_the_log()
    assert expected == {"layers": 19, "fusions": 15, "precisions": {"Float": 17}}  # the corpus file, counted once
    assert read_log_record(LOG).facts() == expected


@pytest.fixture
def stored(tmp_path: Path):
    """(entry folder, result, record) of a real TensorRT-RTX build, its record stored beside it."""
    pytest.importorskip("tensorrt_rtx", reason="needs tensorrt-rtx (pip install tensorrt-rtx)")
    from examples.models import write_all
    from pytest_trt.config import BuildConfig, Profile
    from pytest_trt.engines.provider import EngineProvider

    onnx = write_all(tmp_path / "models")["mobilenet_v2"]
    config = BuildConfig(name="mnv2", onnx=onnx, profiles=[Profile(input=((1, 3, 32, 32), (2, 3, 32, 32),
                                                                          (4, 3, 32, 32)))])
    provider = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache", build=True)
    engine = provider.get(config)
    engine.record  # noqa: B018 - parsed in this session: stored with the entry by flush()
    assert not provider.flush()
    hit = EngineProvider("tensorrt-rtx", cache_dir=tmp_path / "cache").get(config)
    assert hit.cached and hit.artifact_dir is not None
    return hit, engine.record


@needs_rtx
def test_a_hit_reads_its_facts_without_making_the_record(stored) -> None:
    hit, record = stored
    facts = hit.record_facts()
    assert facts == record.facts() and facts["fusions"] > 0
    assert not hit.record_parsed, "the record was made only to report two numbers"
    (hit.artifact_dir / RECORD_FILE).unlink()  # read once per engine: every test's report asks again
    assert hit.record_facts() == facts and not hit.record_parsed


@needs_rtx
def test_a_record_stored_without_facts_falls_back_to_the_record(stored) -> None:
    hit, record = stored
    path = hit.artifact_dir / RECORD_FILE
    data = json.loads(path.read_text())
    del data["facts"]  # as an earlier release stored it
    path.write_text(json.dumps(data))
    assert load_facts(hit.artifact_dir, hit.result) is None
    assert hit.record_facts() == record.facts() and hit.record_parsed
    data["facts"] = {"fusions": "many", "precisions": {}}  # damaged: ignored, not reported
    path.write_text(json.dumps(data))
    assert load_facts(hit.artifact_dir, hit.result) is None


@needs_rtx
def test_facts_of_another_engine_are_not_used(stored) -> None:
    hit, record = stored
    assert save_record(hit.artifact_dir, hit.result, record)
    data = json.loads((hit.artifact_dir / RECORD_FILE).read_text())
    data["stamp"]["engine_sha256"] = "0" * 64
    (hit.artifact_dir / RECORD_FILE).write_text(json.dumps(data))
    assert load_facts(hit.artifact_dir, hit.result) is None


SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile

CFG = BuildConfig(name="mnv2", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32)))])

@pytest.mark.trt(CFG)
def test_hit(trt_engine):
    assert trt_engine.result.backend == "tensorrt-rtx"
"""
CONFTEST = """
import json, sys

def pytest_runtest_logreport(report):
    if report.when == "teardown":
        with open("sections.txt", "a") as f:
            f.write("".join(text for name, text in report.sections if "trt" in name.lower()) + "\\n--\\n")

def pytest_unconfigure(config):
    with open("loaded.json", "w") as f:
        json.dump(sorted(m for m in sys.modules if m.startswith("pytest_trt")), f)
"""


@needs_rtx
def test_a_hit_session_reports_the_stored_facts_without_the_record_classes(pytester, tmp_path) -> None:
    from examples.models import write_all

    onnx = write_all(tmp_path / "models")["mobilenet_v2"]
    pytester.makepyfile(test_model=SUITE.format(onnx=str(onnx)))
    pytester.makeconftest(CONFTEST)
    args = ("-p", "no:cacheprovider", "--trt-backend", "tensorrt-rtx")
    pytester.runpytest_subprocess(*args, "--trt-engine-build").assert_outcomes(passed=1)
    built = (pytester.path / "sections.txt").read_text()
    (pytester.path / "sections.txt").unlink()
    hit = pytester.runpytest_subprocess(*args)
    hit.assert_outcomes(passed=1)
    assert (pytester.path / "sections.txt").read_text() == built  # the same report text, from the stored facts
    log = next((pytester.path / ".trt_cache").glob("*/*/build.log"))
    counted = _counted_from_the_log(log)
    assert f"fusions: {counted['fusions']}\n" in built and f"precisions: Float {counted['precisions']['Float']}" in built
    assert re.search(rf"mnv2 v1\.0 .* cached .* {counted['layers']} ", hit.stdout.str()), hit.stdout.str()
    loaded = set(json.loads((pytester.path / "loaded.json").read_text()))
    assert "pytest_trt.audit.recorder" in loaded  # positive control: the engine was audited
    assert "pytest_trt.buildlog.record" not in loaded
