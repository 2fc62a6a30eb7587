"""Readers documented as never fatal, fuzzed: each raises only its own documented error, never a raw exception.

* calibration cache: parsing never raises; reading a file raises only LogParseError (unreadable file)
* layer JSON: any JSON document gives a record (entries it cannot read are counted); any file bytes give a
  record or LogParseError
* ONNX index of a model file (``log parse --onnx``): any bytes give an index or LogParseError
* Polygraphy importer: any JSON or bytes give arrays or GoldenError
* log files: any bytes are either refused by ``check_log_file`` with LogParseError or parsed
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_trt.buildlog.calibcache import parse_calibration_cache, read_calibration_cache
from pytest_trt.buildlog.readers import layer_json_record, read_layer_json
from pytest_trt.errors import GoldenError, LogParseError
from tests.fuzz import fuzz_settings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# -- calibration caches ------------------------------------------------------------------------------------

_HEADER = st.sampled_from(["TRT-8601-EntropyCalibration2", "TRT-101401-MinMaxCalibration", "TRT-7000-X", "",
                           "TRT-\u0668\u0666\u0660\u0661-Entropy", "TRT-8601-EntropyCalibration2\n: "])
_HEX = st.text(alphabet="0123456789abcdefABCDEF", max_size=12)
_CACHE_LINE = st.one_of(st.text(max_size=30), st.builds("{}: {}".format, st.text(max_size=12), _HEX | st.text(max_size=8)))


@fuzz_settings
@given(_HEADER, st.lists(_CACHE_LINE, max_size=8))
def test_fuzz_calibration_cache_text_never_raises(header: str, lines: list[str]) -> None:
    cache = parse_calibration_cache("\n".join([header, *lines]))
    assert set(cache.scales) == set(cache.raw)
    assert cache.unparsed_lines >= 0


@fuzz_settings
@given(st.binary(max_size=300))
def test_fuzz_calibration_cache_file_never_raises(scratch: Path, data: bytes) -> None:
    path = scratch / "calib.cache"
    path.write_bytes(data)
    read_calibration_cache(path)


def test_calibration_cache_cases_found_by_the_probe() -> None:
    """``TRT-8601-EntropyCalibration2\\n: `` raised struct.error; short hex values are unparsed lines."""
    cache = parse_calibration_cache("TRT-8601-EntropyCalibration2\n: ")
    assert cache.scales == {} and cache.unparsed_lines == 1
    cache = parse_calibration_cache("TRT-8601-EntropyCalibration2\na: 3c\nb: 3c000000\n")
    assert cache.unparsed_lines == 1 and cache.scales == {"b": 2.0**-7}  # float32 0x3c000000: exponent 120, mantissa 0


# -- layer JSON --------------------------------------------------------------------------------------------

_KEYS = st.sampled_from(["Name", "LayerType", "Inputs", "Outputs", "TacticValue", "TacticName", "Metadata",
                         "Dimensions", "Format/Datatype", "Datatype", "Format"])
_TENSOR = st.dictionaries(_KEYS, JSON, max_size=4)
_LAYER = st.one_of(JSON, st.dictionaries(_KEYS, st.one_of(JSON, st.lists(_TENSOR, max_size=2)), max_size=6))
_LAYER_DOC = st.one_of(JSON, st.fixed_dictionaries({"Layers": st.one_of(JSON, st.lists(_LAYER, max_size=4))},
                                                   optional={"Bindings": JSON, "I/O Tensors": JSON}))


@fuzz_settings
@given(_LAYER_DOC)
def test_fuzz_layer_json_document_never_raises(doc: object) -> None:
    record = layer_json_record(doc)
    assert 0 <= record.unparsed_lines <= record.total_lines


@fuzz_settings
@given(st.one_of(st.binary(max_size=200), _LAYER_DOC.map(lambda d: json.dumps(d).encode())))
def test_fuzz_layer_json_file_raises_only_log_parse_error(scratch: Path, data: bytes) -> None:
    path = scratch / "layers.json"
    path.write_bytes(data)
    try:
        read_layer_json(path)
    except LogParseError as exc:
        assert str(path) in exc.message


def test_layer_json_case_found_by_the_probe() -> None:
    record = layer_json_record({"Layers": [{"Name": None, "LayerType": None, "Inputs": None},
                                           {"Name": "conv1", "Inputs": None, "Outputs": [{"Dimensions": None}]}]})
    assert [layer.name for layer in record.layers] == ["conv1"]
    assert record.unparsed_lines == 1 and record.total_lines == 2


# -- ONNX models given to log parse --onnx ------------------------------------------------------------------


@fuzz_settings
@given(st.binary(max_size=200))
def test_fuzz_onnx_index_raises_only_log_parse_error(scratch: Path, data: bytes) -> None:
    from pytest_trt.buildlog.names import OnnxIndex

    path = scratch / "model.onnx"
    path.write_bytes(data)
    try:
        OnnxIndex.load(path)
    except LogParseError as exc:
        assert exc.message.startswith(f"{path}: not a readable ONNX model (")


# -- log files -----------------------------------------------------------------------------------------------


@fuzz_settings
@given(st.one_of(st.binary(max_size=300), st.text(max_size=200).map(lambda t: t.encode("utf-16"))))
def test_fuzz_log_files_are_refused_or_parsed(scratch: Path, data: bytes) -> None:
    from pytest_trt.buildlog.readers import read_log
    from pytest_trt.buildlog.sniff import check_log_file

    path = scratch / "build.log"
    path.write_bytes(data)
    try:
        check_log_file(path)
    except LogParseError as exc:
        assert exc.message.startswith(f"{path}: ")
        return
    assert read_log(path).total_lines >= 0


# -- Polygraphy JSON -----------------------------------------------------------------------------------------


def _npy(array: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, array)
    return base64.b64encode(buf.getvalue()).decode()


_ARRAY = st.sampled_from([
    {"polygraphy_class": "ndarray", "array": _npy(np.zeros((2, 3), np.float32))},
    {"polygraphy_class": "ndarray", "array": _npy(np.zeros((1,), np.int64))},
    {"polygraphy_class": "ndarray", "array": _npy(np.float32(1))},
    {"polygraphy_class": "ndarray", "array": ""},
    {"polygraphy_class": "ndarray", "array": "!!"},
    {"polygraphy_class": "ndarray", "array": _npy(np.zeros((2, 3), np.float32))[:40]},
    {"polygraphy_class": "LazyArray", "values": {"polygraphy_class": "ndarray", "array": _npy(np.ones(3))}},
    {"polygraphy_class": "LazyNumpyArray"},
])
_VALUE = st.one_of(JSON, _ARRAY)
_FEEDS = st.lists(st.one_of(JSON, st.dictionaries(st.sampled_from(["x", "y"]), _VALUE, max_size=2)), max_size=3)
_ITERATION = st.one_of(JSON, st.fixed_dictionaries(
    {"outputs": st.one_of(JSON, st.dictionaries(st.sampled_from(["out", "o2"]), _VALUE, max_size=2))}))
_ENTRY = st.one_of(JSON, st.lists(st.one_of(st.text(max_size=3), st.lists(_ITERATION, max_size=3), JSON), max_size=3),
                   st.tuples(st.sampled_from(["trt", "ort"]), st.lists(_ITERATION, max_size=3)).map(list))
_RESULTS = st.one_of(JSON, st.fixed_dictionaries(
    {"polygraphy_class": st.just("RunResults"), "lst": st.one_of(JSON, st.lists(_ENTRY, max_size=3))}))


def _only_golden_errors(call, path: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        call(path)
    except GoldenError as exc:
        assert str(path) in exc.message


@fuzz_settings
@given(st.one_of(_FEEDS.map(lambda d: json.dumps(d).encode()), st.binary(max_size=60)))
def test_fuzz_polygraphy_inputs_raise_only_golden_error(scratch: Path, data: bytes) -> None:
    from pytest_trt.golden.polygraphy_import import load_polygraphy_inputs

    path = scratch / "inputs.json"
    path.write_bytes(data)
    _only_golden_errors(load_polygraphy_inputs, path)


@fuzz_settings
@given(st.one_of(_RESULTS.map(lambda d: json.dumps(d).encode()), st.binary(max_size=60)),
       st.sampled_from([None, "trt"]))
def test_fuzz_polygraphy_outputs_raise_only_golden_error(scratch: Path, data: bytes, runner: str | None) -> None:
    from pytest_trt.golden.polygraphy_import import load_polygraphy_outputs, polygraphy_runners

    path = scratch / "outputs.json"
    path.write_bytes(data)
    _only_golden_errors(lambda p: load_polygraphy_outputs(p, runner=runner), path)
    _only_golden_errors(polygraphy_runners, path)


@pytest.mark.parametrize(("doc", "message"), [
    ({"polygraphy_class": "RunResults", "lst": [[]]}, "RunResults entry 0 is not [runner name, [iterations]]"),
    ({"polygraphy_class": "RunResults", "lst": [None]}, "RunResults entry 0 is not [runner name, [iterations]]"),
    ({"polygraphy_class": "RunResults", "lst": [["trt", [{}]]]}, "runner 'trt' iteration 0 has no 'outputs' object"),
])
def test_polygraphy_output_cases_found_by_the_probe(tmp_path: Path, doc: object, message: str) -> None:
    from pytest_trt.golden.polygraphy_import import load_polygraphy_outputs

    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(GoldenError, match=re_escape(message)):
        load_polygraphy_outputs(path)


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe not utf-8", "cannot read Polygraphy JSON"),
    (json.dumps([{"x": {"polygraphy_class": "ndarray", "array": ""}}]).encode(), "cannot decode the base64 .npy"),
    (b"[{}]", "iteration 0 holds no tensors"),
    (b"[null]", "expected a non-empty list of feed dicts"),
])
def test_polygraphy_input_cases_found_by_the_probe(tmp_path: Path, content: bytes, message: str) -> None:
    from pytest_trt.golden.polygraphy_import import load_polygraphy_inputs

    path = tmp_path / "inputs.json"
    path.write_bytes(content)
    with pytest.raises(GoldenError, match=re_escape(message)):
        load_polygraphy_inputs(path)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)
