"""The parsed build record stored with a cache entry: a hit reads it instead of parsing the log again.

The stored record must be exactly what a fresh parse of the same entry gives (the
audit bundle and the assertions both read ``engine.record``); a stale or foreign
file is never used.
"""

from __future__ import annotations

import json

import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.engines.provider import EngineProvider
from pytest_trt.engines.record_store import RECORD_FILE
from pytest_trt.testing import SpyBackend
from tests.conftest import needs_ort, needs_rtx

DYN = Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))


def _rtx():
    from pytest_trt.backends.tensorrt import TensorRTBackend

    return "tensorrt-rtx", TensorRTBackend("tensorrt_rtx")


def _ort():
    from pytest_trt.backends.onnxruntime import OrtBackend

    return "onnxruntime", OrtBackend()


BACKENDS = [pytest.param(_rtx, marks=needs_rtx, id="tensorrt-rtx"), pytest.param(_ort, marks=needs_ort, id="ort")]


def _provider(tmp_path, name, backend):
    return EngineProvider(name, cache_dir=tmp_path / "cache", backend=backend, build=True)


@pytest.mark.parametrize("make", BACKENDS)
def test_hit_reads_the_stored_record_equal_to_a_fresh_parse(tmp_path, models, make):
    name, real = make()
    config = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    backend = SpyBackend(real)
    first_session = _provider(tmp_path, name, backend)
    built = first_session.get(config)
    parsed = built.record  # as the audit layer does for every engine it bundles
    first_session.flush()  # the entry is complete: its record is stored with it
    stored = built.artifact_dir / RECORD_FILE
    assert stored.is_file() and backend.records == 1

    hit = _provider(tmp_path, name, backend).get(config)
    assert hit.cached
    assert hit.record == parsed
    assert backend.records == 1  # not parsed again
    fresh = real.record(hit.result, config)  # independent: the backend parses the cached log now
    assert hit.record == fresh and hit.record.layers and hit.record.to_dict() == fresh.to_dict()


@needs_rtx
def test_stale_or_missing_record_is_parsed_again_and_replaced(tmp_path, models):
    name, real = _rtx()
    config = BuildConfig(name="cbr", onnx=models["conv_bn_relu"], profiles=[DYN])
    backend = SpyBackend(real)
    session = _provider(tmp_path, name, backend)
    entry = session.get(config).artifact_dir
    session.flush()  # no test read the record: nothing stored yet (an entry of an earlier release)
    assert not (entry / RECORD_FILE).exists()

    hit = _provider(tmp_path, name, backend).get(config)
    first = hit.record
    assert backend.records == 1 and (entry / RECORD_FILE).is_file()  # stored lazily on the first hit

    data = json.loads((entry / RECORD_FILE).read_text())
    data["stamp"]["record_schema"] = 0  # written by a parser of another record schema
    data["record"]["layers"] = []
    (entry / RECORD_FILE).write_text(json.dumps(data))
    again = _provider(tmp_path, name, backend).get(config).record
    assert backend.records == 2 and again == first and again.layers

    data = json.loads((entry / RECORD_FILE).read_text())
    data["stamp"]["engine_sha256"] = "0" * 64  # another engine's record
    (entry / RECORD_FILE).write_text(json.dumps(data))
    assert _provider(tmp_path, name, backend).get(config).record == first and backend.records == 3

    (entry / RECORD_FILE).write_text("{not json")
    assert _provider(tmp_path, name, backend).get(config).record == first and backend.records == 4
    assert json.loads((entry / RECORD_FILE).read_text())["stamp"]["record_schema"] >= 1
