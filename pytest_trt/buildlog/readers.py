"""The public readers: build logs, captured log entries and layer JSON into a :class:`BuildRecord`.

They sit above the record and its parsers (:mod:`.parser`, :mod:`.layerjson`); the record knows none of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..artifact import BuildResult, LogEntry, iter_log_lines
from .layerjson import layer_json_record, load_layer_json
from .parser import LogParser
from .record import BuildRecord


def parse_lines(lines: Iterable[str], *, onnx: Any = None) -> BuildRecord:
    """Parse log lines (with or without newlines) of any dialect into a :class:`BuildRecord`.

    Streaming and constant-memory in the number of lines. ``onnx`` (path, ``ModelProto`` or
    :class:`OnnxIndex`) lets ``{ForeignNode[a...b]}`` expand to every ONNX node from a to b.
    """
    parser = LogParser(onnx=onnx)
    parser.feed_all(lines)
    return parser.finish()


def parse_entries(entries: Iterable[LogEntry], *, onnx: Any = None) -> BuildRecord:
    """Parse the messages a live build captured (:class:`pytest_trt.artifact.LogEntry`)."""
    return parse_lines(iter_log_lines(entries), onnx=onnx)


def parse_result(result: BuildResult, *, onnx: Any = None) -> BuildRecord:
    """Parse a live build's log and fill in what the log itself does not state.

    TensorRT-RTX logs name neither the library nor its version; the :class:`BuildResult` knows both.
    """
    record = parse_entries(result.log, onnx=onnx)
    return replace(record, backend=result.backend, backend_version=result.backend_version or record.backend_version)


def read_log(path: str | Path, onnx: Any = None) -> BuildRecord:
    """Parse a log file: trtexec/polygraphy/python output or a pytest-trt ``build.log``.

    Bytes that are not UTF-8 are replaced, CRLF and CR line ends are accepted; UTF-16 and UTF-32 logs
    with a byte-order mark (and UTF-16 without one) are decoded as such.  A missing or
    unreadable file raises :class:`~pytest_trt.errors.LogParseError` naming the path.
    """
    parser = LogParser(onnx=onnx)
    parser.feed_path(path)
    return parser.finish()


def read_layer_json(path: str | Path, *, onnx: Any = None) -> BuildRecord:
    """Read a layer-information JSON file into a :class:`BuildRecord` (``source="layer-json"``).

    A missing, unreadable or non-JSON file raises :class:`~pytest_trt.errors.LogParseError` naming the path.
    """
    return layer_json_record(load_layer_json(path), onnx=onnx)

