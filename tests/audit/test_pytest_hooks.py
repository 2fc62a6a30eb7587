"""The audit hooks for real: bundles, report sections, junit properties (with and without xdist), pytest-html."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_trt.options import BUNDLE_DIR, SIGN_KEY
from pytest_trt.pytest_plugin.audit import PROPERTIES, SECTION
from tests.conftest import RTX_MM, RTX_VERSION, needs_rtx

SUITE = """
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.pytest_plugin.session import session_of

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r},
                  profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))])

@pytest.mark.trt(CFG)
def test_golden(trt_engine, request):
    session_of(request.config).record(request.node).add_verdict(
        {{"config_hash": trt_engine.result.config_hash, "verdict": "pass", "l2_delta": 0.0}})

@pytest.mark.trt(CFG)
def test_plain(trt_engine):
    assert trt_engine.result.backend == "tensorrt-rtx"

def test_without_engine():
    pass
"""
HOOKS = ("-p", "no:cacheprovider", "--trt-engine-build",
         "--trt-backend", "tensorrt-rtx")


@pytest.fixture
def suite(pytester, models):
    pytester.makepyfile(test_model=SUITE.format(onnx=str(models["conv_bn_relu"])))
    return pytester


def _properties(xml_path: Path) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for case in ET.parse(xml_path).iter("testcase"):
        props: dict[str, list[str]] = {}
        for p in case.iter("property"):
            props.setdefault(p.get("name"), []).append(p.get("value"))
        out[case.get("name")] = props
    return out


@needs_rtx
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["no-xdist", "xdist-2"])
def test_junit_properties_and_one_bundle_per_engine(suite, xdist):
    result = suite.runpytest_subprocess(*HOOKS, *xdist, "--junitxml=junit.xml", "-rP")
    result.assert_outcomes(passed=3)
    bundles = sorted((suite.path / "trt-bundles").glob("*.tar.gz"))
    assert [b.name for b in bundles] == [f"cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz"]
    sha = hashlib.sha256(bundles[0].read_bytes()).hexdigest()
    props = _properties(suite.path / "junit.xml")
    assert props["test_without_engine"] == {}
    for name in ("test_golden", "test_plain"):
        got = props[name]
        assert sorted(got) == sorted(PROPERTIES)
        assert got["trt_bundle"] == [str(bundles[0])]
        assert got["trt_backend_version"] == [RTX_VERSION]
        assert got["trt_backend"] == ["tensorrt-rtx"]
        assert len(got["trt_config_hash"][0]) == 64
        if not xdist:  # with -n 2 the golden test may rewrite the bundle after test_plain reported it
            assert got["trt_bundle_sha256"] == [sha]
    result.stdout.fnmatch_lines(["*pytest-trt audit bundles*", f"{bundles[0]}  sha256 {sha[:16]}  *bytes"])
    if not xdist:
        result.stdout.fnmatch_lines([f"*Captured {SECTION} call*", "engine: cbr v1.0 *", f"  bundle: {bundles[0]}",
                                     "  sha256: *", "  fusions: *", "  precisions: *", "  golden: pass"])
    from pytest_trt.audit.verify import verify_bundle

    vb = verify_bundle(bundles[0])
    assert vb.golden == {"test_model.py::test_golden": {"config_hash": vb.config["config_hash"], "verdict": "pass",
                                                        "l2_delta": 0.0}}


@needs_rtx
def test_same_engine_gives_the_same_bundle_across_sessions(suite):
    suite.runpytest_subprocess(*HOOKS, "-k", "plain").assert_outcomes(passed=1)
    path = suite.path / "trt-bundles" / f"cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz"
    first = path.read_bytes()
    suite.runpytest_subprocess(*HOOKS, "-k", "plain", f"{BUNDLE_DIR}=again").assert_outcomes(passed=1)
    assert (suite.path / "again" / path.name).read_bytes() == first  # engine from the cache, same bytes


@needs_rtx
def test_signed_bundles_and_engine_left_out(suite, keypair):
    suite.makeini("[pytest]\ntrt_bundle_engine = false\n")
    result = suite.runpytest_subprocess(*HOOKS, "-k", "plain", f"{SIGN_KEY}={keypair[0]}")
    result.assert_outcomes(passed=1)
    from pytest_trt.audit.verify import verify_bundle

    vb = verify_bundle(suite.path / "trt-bundles" / f"cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz", public_key=keypair[1])
    assert vb.signer and vb.engine_size is None


def test_bad_sign_key_is_a_usage_error(pytester):
    pytester.makepyfile(test_x="def test_x(): pass\n")
    result = pytester.runpytest_subprocess(SIGN_KEY, "missing.pem")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {SIGN_KEY}: cannot read signing key *missing.pem*"])


@needs_rtx
def test_html_report_links_the_bundle(suite):
    pytest.importorskip("pytest_html", reason="pytest-html is not installed (pip install 'pytest-trt[html]')")
    result = suite.runpytest_subprocess(*HOOKS, "-k", "plain", "--html=report/index.html")
    result.assert_outcomes(passed=1)
    html = (suite.path / "report" / "index.html").read_text()
    assert f"../trt-bundles/cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz" in html
    assert f"trt bundle cbr-v1.0-rtx{RTX_MM}-cpu-aot.tar.gz" in html


def test_hooks_module_imports_nothing_heavy():
    code = ("import sys, pytest_trt.plugin, pytest_trt.pytest_plugin.session, pytest_trt.cli; "
            "print(sorted({'tensorrt', 'tensorrt_rtx', 'onnxruntime', 'h5py', 'cryptography'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


TWO_ENGINES = """
import pytest
from pytest_trt import BuildConfig, Profile
from pytest_trt.pytest_plugin.session import session_of

PROFILES = [Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))]
CHECKED = BuildConfig(name="checked", version="1.0", onnx={onnx!r}, profiles=PROFILES)
OTHER = BuildConfig(name="other", version="1.0", onnx={onnx!r}, profiles=PROFILES)

@pytest.mark.trt(CHECKED)
def test_two_engines(trt_engine, trt_build, request):
    other = trt_build(OTHER)
    assert other.result.config_hash != trt_engine.result.config_hash
    session_of(request.config).record(request.node).add_verdict(
        {{"config_hash": trt_engine.result.config_hash, "verdict": "pass", "l2_delta": 0.0}})
"""


@needs_rtx
def test_a_verdict_goes_only_to_the_bundle_of_the_engine_it_checked(pytester, models):
    """One test, two engines, a golden verdict for one of them: only that engine's bundle records it."""
    from pytest_trt.audit.verify import verify_bundle

    pytester.makepyfile(test_two=TWO_ENGINES.format(onnx=str(models["conv_bn_relu"])))
    result = pytester.runpytest_subprocess(*HOOKS, "-rP")
    result.assert_outcomes(passed=1)
    bundles = {b.name.split("-v")[0]: b for b in (pytester.path / "trt-bundles").glob("*.tar.gz")}
    assert sorted(bundles) == ["checked", "other"]
    checked = verify_bundle(bundles["checked"]).golden or {}
    other = verify_bundle(bundles["other"]).golden or {}
    assert [v["verdict"] for v in checked.values()] == ["pass"]
    assert other == {}
    result.stdout.fnmatch_lines(["engine: checked v1.0 *", "*", "*", "*", "*", "  golden: pass",
                                 "engine: other v1.0 *", "*", "*", "*", "*", "  golden: not checked"])
