"""The streaming log lexer and readers: dialects, continuation lines, robustness, file handling."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_trt.artifact import LogEntry
from pytest_trt.buildlog import BuildRecord, parse_entries, parse_lines, read_layer_json, read_log
from pytest_trt.buildlog.dialects import DIALECTS, version_from_tag
from pytest_trt.buildlog.parser import LogParser
from pytest_trt.buildlog.readers import layer_json_record
from pytest_trt.errors import LogParseError


@pytest.mark.parametrize("dialect", DIALECTS, ids=[d.name for d in DIALECTS])
def test_every_dialect_example_is_understood(dialect) -> None:  # type: ignore[no-untyped-def]
    record = parse_lines([dialect.example])
    assert (record.total_lines, record.unparsed_lines) == (1, 0)


@pytest.mark.parametrize(
    ("line", "severity"),
    [
        ("[09/10/2023-12:56:26] [W] [TRT] Careful", "WARNING"),  # trtexec
        ("[04/20/2024-08:47:53] [TRT] [E] Broken", "ERROR"),  # python 8.6
        ("[TensorRT] WARNING: Careful", "WARNING"),  # python 7.x
        ("[W] [TRT] Careful", "WARNING"),  # samples
        ("[INTERNAL_ERROR] Broken", "INTERNAL_ERROR"),  # build.log
        ("[W] Careful", "WARNING"),  # polygraphy
        ("[I] Fine", None),
    ],
)
def test_severity_per_dialect(line: str, severity: str | None) -> None:
    record = parse_lines([line])
    assert [m.severity for m in record.messages] == ([severity] if severity else [])


@pytest.mark.parametrize(
    "line",
    [
        "[09/10/2023-12:56:26] [V] [TRT] ConvReluFusion: Fusing Conv_1342 with Relu_1343",
        "[TensorRT] VERBOSE: ConvReluFusion: Fusing Conv_1342 with Relu_1343",
        "[TRT]    ConvReluFusion: Fusing Conv_1342 with Relu_1343",  # jetson-inference
        "[04/20/2024-08:48:21] [TRT] [V] ConvReluFusion: Fusing Conv_1342 with Relu_1343",
        "[VERBOSE] ConvReluFusion: Fusing Conv_1342 with Relu_1343",
    ],
)
def test_fusion_line_in_every_prefix(line: str) -> None:
    (event,) = parse_lines([line]).fusion_events
    assert (event.pass_name, event.first, event.second) == ("ConvReluFusion", "Conv_1342", "Relu_1343")


def test_fusion_shapes_of_7x() -> None:
    record = parse_lines([
        "[TensorRT] VERBOSE: Fusing convolution weights from 001_convolutional with scale 001_convolutional_bn",
        "[02/18/2021-11:57:18] [V] [TRT] Fusing Conv_3 with Relu_4",
        "[02/18/2021-11:57:18] [V] [TRT] Merging layers: Conv_3 + Relu_4 || Conv_0 + Relu_1",
    ])
    assert [(e.pass_name, e.first, e.second, e.kind) for e in record.fusion_events] == [
        (None, "001_convolutional", "001_convolutional_bn", "vertical"),
        (None, "Conv_3", "Relu_4", "vertical"),
        (None, "Conv_3 + Relu_4", "Conv_0 + Relu_1", "horizontal"),
    ]


def test_layer_lines_of_7x_python_carry_their_own_prefix() -> None:
    record = parse_lines([
        "[TensorRT] VERBOSE: Engine Layer Information:",
        "[TensorRT] VERBOSE: Layer(FusedConvActDirect): (Unnamed Layer* 0) [Convolution] + (Unnamed Layer* 1) "
        "[Activation], Tactic: 141, data[Float(1,32,32)] -> (Unnamed Layer* 1) [Activation]_output[Float(6,28,28)]",
    ])
    (layer,) = record.layers
    assert (layer.type, layer.tactic, layer.outputs[0].dims, layer.precision) == (
        "FusedConvActDirect", "141", (6, 28, 28), "Float")
    assert (layer.kind, layer.origins) == ("helper", ())  # unnamed layers name no ONNX node


def test_engine_layer_info_new_syntax_with_vectorized_and_empty_sides() -> None:
    record = parse_lines([
        "[03/25/2023-07:13:22] [V] [TRT] Engine Layer Information:",
        "Layer(CaskConvolution): Conv-1 + ReLU-2, Tactic: 0x98e92db98836b738, Reformatted Input Tensor 0 to "
        "Conv-1 + ReLU-2 (Half[-1,1:2,28,28]) -> tensor-2 (Half[-1,32:2,28,28])",
        "Layer(TrainStation): [trainStation1], Tactic: 0x0000000000000000,  -> ",
        "Layer(TopK): top, Tactic: 0x1, x (Float[-1,10]) -> (Unnamed Layer* 22) [TopK]_output (1) (Int32[-1,1])",
    ])
    conv, station, topk = record.layers
    assert conv.origins == ("Conv-1", "ReLU-2") and conv.is_fusion and conv.precision == "Half"
    assert conv.outputs[0].dims == (-1, 32, 28, 28) and conv.outputs[0].format == "Half[-1,32:2,28,28]"
    assert (station.inputs, station.outputs, station.kind) == ((), (), "helper")
    assert topk.outputs[0].name == "(Unnamed Layer* 22) [TopK]_output (1)" and topk.precision == "Int32"


def test_a_new_listing_replaces_the_previous_one() -> None:
    header = "[I] [TRT] Engine Layer Information:"
    one = "Layer(Scale): a, Tactic: 0, x[Float(1)] -> y[Float(1)]"
    two = "Layer(Scale): b, Tactic: 0, x[Half(1)] -> y[Half(1)]"
    record = parse_lines([header, one, "[I] [TRT] Original: 3 layers", header, two])
    assert [layer.name for layer in record.layers] == ["b"]


def test_detailed_listing_rtx17_fields_and_separators() -> None:
    meta = "[ONNX Layer: block1/conv_dw]\x1f[ONNX Layer: block1/bn_dw]\x1f[ONNX Layer: block1/relu6]"
    entry = LogEntry("VERBOSE", 0.0, "Layers:\n"
        "Name: __mye1040_0_myl0_0, LayerType: shape_call, Inputs: [], Constants: [], Outputs: [], TacticName: , "
        "StreamId: 0, Metadata: \n"
        "Name: __myl_CorrMulAddMaxMin_myl0_3, LayerType: runtime_fusion, Inputs: [ { Name: t0, Dimensions: "
        "[-1,16,16,16], Strides: [4096,1,256,16], StrideOrder: [3,0,2,1], Datatype: Float, Format: (NHWC) Channel "
        "major format }], Constants: [ { Name: c, Dimensions: [16,1,3,3], Strides: [9,1,3,1], StrideOrder: [3,0,2,1], "
        "Datatype: Float, Format: (NHWC) Channel major format }], Outputs: [ { Name: t1, Dimensions: [-1,16,16,16], "
        "Strides: [4096,1,256,16], StrideOrder: [3,0,2,1], Datatype: Half, Format: (NHWC) Channel major format }], "
        f"TacticName: , StreamId: 0, Metadata: {meta}\n"
        "\nI/O Tensors:\n Name: input, IOMode: Input, DataType: Float\n\nEngine Metadata:\n Multi-Device: Disabled")
    record = parse_entries([entry])
    helper, kernel = record.layers
    assert helper.kind == "helper" and helper.origins == ()
    assert kernel.origins == ("block1/conv_dw", "block1/bn_dw", "block1/relu6")
    assert kernel.inputs[0].dims == (-1, 16, 16, 16) and kernel.outputs[0].dtype == "Half"
    assert kernel.outputs[0].format == "(NHWC) Channel major format" and kernel.precision == "Half"
    assert record.bindings == ("input",) and record.unparsed_lines == 0 and record.origins_exact


def test_detailed_line_brackets_nest_and_a_line_without_layer_type_is_unparsed() -> None:
    # tensor names holding brackets of both kinds: each list and object ends at its own closing bracket
    kernel = ("Name: k1, LayerType: kgen, Inputs: [ { Name: x[0]{a}, Dimensions: [1,2], Format/Datatype: Half }, "
              "{ Name: y, Dimensions: [3], Format/Datatype: Float }], Outputs: [ { Name: z, Dimensions: [4,5], "
              "Format/Datatype: Half }], TacticName: t1, TacticValue: 0x1, StreamId: 0, Metadata: ")
    record = parse_lines(["[V] [TRT] Layers:", kernel, "Name: k2", "[V] [TRT] Layers:", kernel.replace("k1", "k3")])
    (layer,) = record.layers  # the second listing replaced the first
    assert layer.name == "k3" and layer.type == "kgen" and layer.tactic == "0x1" and layer.precision == "Half"
    assert [(t.name, t.dims, t.dtype) for t in layer.inputs] == [("x[0]{a}", (1, 2), "Half"), ("y", (3,), "Float")]
    assert [(t.name, t.dims) for t in layer.outputs] == [("z", (4, 5))]
    assert record.unparsed_lines == 1  # "Name: k2": no LayerType


@pytest.mark.parametrize("sep", ["\x1e", "\x1f", ""])
def test_metadata_separators(sep: str) -> None:
    line = (f"[V] [TRT] ForeignNode {{ForeignNode[a...c]}} metadata: [ONNX Layer: a]{sep}[ONNX Layer: b]{sep}"
            "[ONNX Layer: c]")
    (sg,) = parse_lines([line]).subgraphs
    assert (sg.name, sg.origins) == ("{ForeignNode[a...c]}", ("a", "b", "c"))


def test_memory_last_occurrence_wins_and_units() -> None:
    record = parse_lines([
        "[V] [TRT] Total Activation Memory: 1078224386",  # 8.2.3 prints a [V] value first ...
        "[I] [TRT] Total Activation Memory: 2409473",  # ... then the final one
        "[I] [TRT] Total Weights Memory: 6556436 bytes",  # 10.x units
        "[I] [TRT] [MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 14 MiB, GPU 4096 MiB",
    ])
    assert (record.memory.activation, record.memory.weights, record.memory.peak_cpu_mib,
            record.memory.peak_gpu_mib) == (2409473, 6556436, 14, 4096)


@pytest.mark.parametrize(("tag", "version"), [("8601", "8.6.1"), ("8003", "8.0.3"), ("101401", "10.14.1"),
                                              ("7103", "7.1.3"), ("100600", "10.6.0")])
def test_version_tags(tag: str, version: str) -> None:
    assert version_from_tag(tag) == version


def test_warning_continuation_lines_join_the_message() -> None:
    record = parse_lines(["[WARNING] first line", "second line", "[INFO] next"])
    assert [m.text for m in record.messages] == ["first line\nsecond line"]
    assert record.unparsed_lines == 0


def test_empty_message_with_lost_trailing_space() -> None:
    assert parse_lines(["[04/25/2026-00:54:25] [I]"]).unparsed_lines == 0


def test_read_log_crlf_and_bad_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"[V] [TRT] ConvReluFusion: Fusing a\xff with b\r\n\xfe\xfd garbage\r\n"
                     b"[I] [TRT] Total Activation Memory: 12\r\n")
    record = read_log(path)
    assert record.fusion_events[0].first == "a\ufffd" and record.fusion_events[0].second == "b"
    assert (record.total_lines, record.unparsed_lines, record.memory.activation) == (3, 1, 12)


@pytest.mark.parametrize("reader", [read_log, read_layer_json])
def test_missing_file_names_the_path(tmp_path: Path, reader) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "nope" / "build.log"
    with pytest.raises(LogParseError, match="nope/build.log") as info:
        reader(missing)
    assert info.value.context["path"] == str(missing)


def test_layer_json_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "layers.json"
    path.write_text("{not json")
    with pytest.raises(LogParseError, match="layers.json"):
        read_layer_json(path)


def test_layer_json_11x_style_split_fields_and_io_tensors() -> None:
    doc = {
        "Layers": [
            {"Name": "__myl_CorrMulAddRelu_myl0_2", "LayerType": "runtime_fusion",
             "Inputs": [{"Name": "x", "Dimensions": [-1, 3, 32, 32], "Datatype": "Float", "Format": "(NHWC) Channel major format"}],
             "Outputs": [{"Name": "y", "Dimensions": [-1, 16, 16, 16], "Datatype": "Half", "Format": "(NHWC)"}],
             "TacticName": "", "Metadata": "[ONNX Layer: conv1]\u001f[ONNX Layer: bn1]\u001f[ONNX Layer: relu1]"},
            42,  # not a layer: counted, not fatal
        ],
        "I/O Tensors": [{"Name": "input", "IOMode": "Input"}, {"Name": "logits", "IOMode": "Output"}],
    }
    record = layer_json_record(doc)
    (layer,) = record.layers
    assert layer.origins == ("conv1", "bn1", "relu1") and layer.precision == "Half"
    assert record.bindings == ("input", "logits") and record.unparsed_lines == 1 and record.origins_exact


def test_record_json_round_trip(corpus: Path) -> None:
    record = read_log(corpus / "log_trt8.6.1_segformer_fp32_trtexec_verbose.txt")
    again = BuildRecord.from_json(record.to_json())
    assert again == record


# -- never crash --------------------------------------------------------------------------------

_PIECES = st.sampled_from([
    "[V] [TRT] ", "[09/10/2023-12:56:26] [W] [TRT] ", "[VERBOSE] ", "[TensorRT] INFO: ", "Layer(", "Name: ",
    "Engine Layer Information:", "Layers:", "Fusing ", " with ", ", Tactic: ", " -> ", "[Float(", "(Half[", "]",
    ")", "{ForeignNode[", "...", "Metadata: ", "[ONNX Layer: ", "\x1e", "\x1f", "Total Activation Memory: ",
    "Original: ", " layers", "PWN(", " + ", " || ", "Inputs: [ { ", "}", "&&&& PASSED TensorRT.trtexec [TensorRT v",
])
_LINE = st.lists(st.one_of(_PIECES, st.text(max_size=30)), max_size=12).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=30))
def test_any_lines_parse(lines: list[str]) -> None:
    record = parse_lines(lines)
    assert record.total_lines == len(lines)
    assert 0 <= record.unparsed_lines <= len(lines)
    BuildRecord.from_json(record.to_json())  # whatever was read is serialisable


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=20), st.sampled_from([b"\n", b"\r\n", b"\r"]))
def test_any_bytes_parse(tmp_path_factory: pytest.TempPathFactory, chunks: list[bytes], eol: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "log.txt"
    path.write_bytes(eol.join(chunks))
    record = read_log(path)
    assert record.total_lines <= max(1, sum(c.count(b"\n") + c.count(b"\r") + 1 for c in chunks) + len(chunks))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="[&\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
                        min_size=1).filter(str.strip), max_size=20))
def test_unknown_lines_are_counted(lines: list[str]) -> None:
    """Lines with no known prefix and no block header before them are all counted as not understood."""
    record = parse_lines(lines)
    assert record.unparsed_lines == record.total_lines == len(lines)


@pytest.mark.parametrize("name", sorted(p.name for p in
                                         (Path(__file__).parents[1] / "data" / "trt_logs").glob("log_*.txt")))
def test_chunk_scanner_equals_line_by_line(corpus: Path, name: str) -> None:
    """read_log skips lines inside the regex engine; the result is what the plain line loop gives."""
    with open(corpus / name, encoding="utf-8", errors="replace") as f:
        by_line = parse_lines(f)
    parser = LogParser()
    with open(corpus / name, encoding="utf-8", errors="replace") as f:
        parser.feed_file(f, chunk_chars=4099)  # small chunks: many lines cross a chunk boundary
    assert parser.finish() == by_line == read_log(corpus / name)


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE.map(lambda x: x.replace("\r", "").replace("\n", "")), max_size=30), st.integers(1, 64))
def test_chunk_scanner_equals_line_by_line_on_any_text(lines: list[str], chunk: int) -> None:
    text = "\n".join(lines)
    parser = LogParser()
    parser.feed_file(io.StringIO(text), chunk_chars=chunk)
    assert parser.finish() == parse_lines(io.StringIO(text))


#: line starts the chunk scanner decides on: prefixes it may skip, near misses it must not, and message heads
_SCAN_PREFIXES = st.sampled_from([
    "[09/10/2023-12:56:26] [V] [TRT] ", "[09/10/2023-12:56:26] [I] ", "[09/10/2023-12:56:26] [I] [TRT] ",
    "[04/20/2024-08:48:21] [TRT] [V] ", "[01/29/2022-15:09:28] [01/29/2022-15:09:28] [V] [TRT] ",
    "[\u0660\u0669/10/2023-12:56:26] [V] [TRT] ", "[9/10/2023-12:56:26] [V] [TRT] ", "[09/10/2023-12:56:26] [W] [TRT] ",
    "[09/10/2023-12:56:26] [V] [TRT]", "[TensorRT] VERBOSE: ", "[I] [TRT] ", "[VERBOSE] ", "[INFO] ", "[V] ",
    "[V] [TRT] ", "INFO: [TRT]: ", "[TRT]    ", "[TRT]   ", "", " ", "\t",
])
_SCAN_HEADS = st.sampled_from([
    "Fusing ", "ConvReluFusion: Fusing ", "conv9: Fusing ", "Tactic: 0x0 Time: 0.1", "Tactic: Fusing ", ": Fusing ",
    "Merging layers: ", "Removing ", "Original: 12 layers", "After vertical fusions: 7 layers", "After x: 7 layer",
    "ForeignNode {ForeignNode[a...b]} metadata:", "Total Activation Memory: 5", "Max Scratch Memory: 3",
    "[MemUsageStats] Peak memory usage of TRT CPU/GPU memory allocators: CPU 1 MiB, GPU 2 MiB", "  Calibration ",
    "\tWriting Calibration Cache", "Reading Calibration Cache", "Engine generation completed in 1.5 seconds",
    "Graph construction completed in 1 seconds", "TensorRT version: 8.6.1", "Loaded engine", "Precision: FP32",
    "Engine Layer Information:", "Engine Layer Information: ", "Layers:", "I/O Tensors:", "Layer(Conv): a, Tactic: 1, "
    "x -> y", "PASSED | Runtime: 1s", "FAILED |", "Name: conv1, LayerType: kgen", "Name: ", "Engine Metadata:",
    "Searching for input: x", "Registering layer: y", "Calibration", "Layer", "Engine",
])
_SCAN_LINE = st.builds(lambda p, h, t: p + h + t, _SCAN_PREFIXES, _SCAN_HEADS,
                       st.sampled_from(["", " ", "x", " with relu1", " 7 layers"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_SCAN_LINE, _SCAN_HEADS), max_size=40), st.integers(1, 200))
def test_chunk_scanner_skips_only_lines_the_parser_ignores(lines: list[str], chunk: int) -> None:
    """Every line the scanner skips is one the line-by-line parser reads as a quiet prefix and nothing else."""
    text = "\n".join(lines)
    parser = LogParser()
    parser.feed_file(io.StringIO(text), chunk_chars=chunk)
    assert parser.finish().to_dict() == parse_lines(lines).to_dict()


_BYTES_PIECES = st.sampled_from([b"\n", b"\r\n", b"\r", b"\xff", b"\xe2\x82", "\u0663".encode(), "\u00e9".encode(), b" ",
                                 b"7 layers"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"\r", b"\n", b"\r\n"]), max_size=40), st.integers(1, 8))
@example([b"\r", b"\r\n"], 1)
@example([b"a", b"\r", b"\r", b"\r", b"\n"], 2)
def test_universal_newlines_equals_text_io(pieces: list[bytes], chunk: int) -> None:
    """CR, CRLF and LF end a line exactly as Python's text layer reads them, wherever the chunks are cut."""
    from pytest_trt.buildlog.chunks import universal_newlines

    data = b"".join(pieces)
    expected = io.TextIOWrapper(io.BytesIO(data), encoding="ascii", newline=None).read().encode()
    assert b"".join(universal_newlines(io.BytesIO(data), chunk)) == expected


def test_universal_newlines_cr_then_crlf_across_one_byte_chunks() -> None:
    from pytest_trt.buildlog.chunks import universal_newlines

    assert b"".join(universal_newlines(io.BytesIO(b"x\r\r\ny"), 1)) == b"x\n\ny"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_SCAN_LINE.map(str.encode), _BYTES_PIECES), max_size=60), st.integers(1, 200))
@example([b"\r", b"\r\n"], 1)
def test_binary_scanner_equals_decoded_lines(pieces: list[bytes], chunk: int) -> None:
    """feed_binary (UTF-8 bytes, only kept lines decoded) reads what the decoded text stream gives line by line:
    CR and CRLF line ends (also split across chunks), invalid UTF-8, non-ASCII digits."""
    data = b"".join(pieces)
    parser = LogParser()
    parser.feed_binary(io.BytesIO(data), chunk_bytes=chunk)
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=None)
    assert parser.finish().to_dict() == parse_lines(text).to_dict()


def test_binary_scanner_keeps_lines_with_non_ascii_digits() -> None:
    """``\\d`` matches any decimal digit in text; the bytes scanner must not skip what the text parser reads."""
    data = "[09/10/2023-12:56:26] [V] [TRT] After vertical fusions: \u0663\u0664 layers\n".encode()
    parser = LogParser()
    parser.feed_binary(io.BytesIO(data))
    assert parser.finish().layer_counts == (("After vertical fusions", 34),)


def test_binary_scanner_pattern_has_no_class_escapes_that_differ_for_bytes() -> None:
    from pytest_trt.buildlog.dialects import SCAN_BYTES_RE

    assert not any(e in SCAN_BYTES_RE.pattern for e in (rb"\d", rb"\w", rb"\s", rb"\b", rb"\D", rb"\W", rb"\S"))


@settings(max_examples=300, deadline=None)
@given(_LINE)
def test_a_line_starting_outside_prefix_first_has_no_prefix(line: str) -> None:
    """The parser skips the prefix regex for lines whose first character no dialect starts with."""
    from pytest_trt.buildlog.dialects import PREFIX_FIRST, PREFIX_RE

    if PREFIX_RE.match(line) or PREFIX_RE.match(line + " "):
        assert line[:1] in PREFIX_FIRST
    assert all(d.example[:1] in PREFIX_FIRST for d in DIALECTS)


def test_huge_and_truncated_lines() -> None:
    big = "[V] [TRT] Layers:\nName: " + "x" * 2_000_000 + ", LayerType: kgen, Inputs: [ { Name: a, Dimensions: [1"
    record = parse_lines(big.split("\n"))
    (layer,) = record.layers  # the truncated entry is still a layer, its broken tensor list is dropped
    assert layer.type == "kgen" and len(layer.name) == 2_000_000
    cut = "[V] [TRT] Engine Layer Information:\nLayer(CaskConvolution): Conv-1 + ReLU-2, Tactic: 0x98e9"
    assert parse_lines(cut.split("\n")).unparsed_lines == 1


def test_parse_result_fills_backend_from_the_build() -> None:
    from pytest_trt.artifact import BuildResult
    from pytest_trt.buildlog import parse_result

    result = BuildResult(
        backend="tensorrt-rtx", engine=b"", config={}, effective_config={}, config_hash="", onnx_sha256="",
        log=(LogEntry("WARNING", 0.1, "In JIT build, strongly typed is enabled by default."),),
        durations={}, versions={}, device={}, backend_version="1.7.1.116",
    )
    record = parse_result(result)
    assert (record.backend, record.backend_version) == ("tensorrt-rtx", "1.7.1.116")
    assert [m.text for m in record.warnings] == ["In JIT build, strongly typed is enabled by default."]
