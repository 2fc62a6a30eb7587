"""The provenance and ML-BOM name the golden a session's check compared with by the sha256 of its golden dataset,
read here from the golden file itself (h5py), in a real pytest run with a real ONNX Runtime engine."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import h5py
import pytest

from tests.ort_models import conv_bn_relu

pytest.importorskip("in_toto_attestation")

TEST = '''
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset

CBR = BuildConfig(name="cbr", onnx="models/cbr.onnx")
DATA = GoldenDataset.from_arrays({"x": np.random.default_rng(5).standard_normal((6, 3, 8, 8)).astype(np.float32)})

@pytest.mark.trt(CBR)
def test_cbr(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATA)
'''


def _statements(bundles: Path) -> dict[str, dict]:
    (path,) = bundles.glob("cbr-*.tar.gz.intoto.jsonl")
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        statement = json.loads(base64.b64decode(json.loads(line)["payload"]))
        out[statement["predicateType"]] = statement
    return out


def test_the_golden_dataset_digest_is_a_resolved_dependency(pytester: pytest.Pytester) -> None:
    (pytester.path / "models").mkdir()
    conv_bn_relu(pytester.path / "models" / "cbr.onnx")
    pytester.makepyfile(test_cbr=TEST)
    run = ("-p", "no:cacheprovider", "--trt-backend", "onnxruntime", "--trt-engine-build")
    pytester.runpytest_subprocess(*run, "--trt-update-golden", "--trt-approve", "first").assert_outcomes(passed=1)
    pytester.runpytest_subprocess(*run).assert_outcomes(passed=1)
    with h5py.File(pytester.path / "golden" / "cbr.h5", "r") as f:
        dataset_sha256 = str(f["dataset"].attrs["sha256"])
    assert len(dataset_sha256) == 64
    statements = _statements(pytester.path / "trt-bundles")
    deps = statements["https://slsa.dev/provenance/v1"]["predicate"]["buildDefinition"]["resolvedDependencies"]
    golden = [d for d in deps if d.get("name", "").endswith("cbr.h5")]
    assert [d["digest"] for d in golden] == [{"sha256": dataset_sha256}], deps
    bom = statements["https://cyclonedx.org/bom"]["predicate"]
    hashes = [c.get("hashes") for c in bom["components"] if c.get("name", "").endswith("cbr.h5")]
    assert hashes == [[{"alg": "SHA-256", "content": dataset_sha256}]], bom["components"]
