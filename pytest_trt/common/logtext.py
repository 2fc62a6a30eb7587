"""build.log as text: the builder's messages (:class:`LogEntry`), their lines, and the split back by build.json's
``log_index`` (a cache entry keeps the log as text until it is first used)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

SEVERITIES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
LOG_FILE = "build.log"
_LOG_INDEX_KEY = '"log_index":['


class LogEntry(NamedTuple):
    """One message from the builder's logger.

    A NamedTuple rather than a frozen dataclass: a build logs about a thousand
    messages and a frozen dataclass is several times slower to create.
    """

    severity: str  # one of SEVERITIES
    time: float  # seconds since the build started
    text: str

    def lines(self) -> list[str]:
        first, *rest = self.text.split("\n")
        return [f"[{self.severity}] {first}", *rest]


def format_log(entries: Iterable[LogEntry]) -> str:
    # ``"[SEVERITY] " + text`` is exactly LogEntry.lines() joined: the continuation lines of a
    # multi-line message are unprefixed (one f-string per message, no split: ~4x faster)
    return "".join([f"[{e.severity}] {e.text}\n" for e in entries])


def index_of(entries: Iterable[LogEntry]) -> list[tuple[str, float, int]]:
    """build.json's ``log_index`` rows of ``entries``: per message its severity, seconds since the start and number
    of lines in build.log."""
    return [(e.severity, e.time, e.text.count("\n") + 1) for e in entries]


def encode_index(rows: list[tuple[str, float, int]]) -> str:
    """``rows`` as build.json encodes its ``log_index`` (compact, ASCII): a JSON array."""
    return json.dumps(rows, separators=(",", ":"))


class PreparedLog(Protocol):
    """A build's messages with build.log's text and build.json's log index made beside the build
    (:class:`pytest_trt.backends.trt_logger.Captured`)."""

    def __call__(self) -> list[LogEntry]: ...

    def text(self) -> str: ...

    def index_json(self) -> str: ...


def encode_build_json(build: dict[str, Any], *, log_index_json: str | None = None) -> bytes:
    """build.json's bytes: compact, sorted keys, ASCII, one newline.  ``log_index_json``: the ``log_index`` already
    encoded (:func:`encode_index`), put in place of ``build``'s own: the same bytes as encoding the rows here."""
    if log_index_json is None:
        return (json.dumps(build, sort_keys=True, separators=(",", ":")) + "\n").encode()
    key, stand_in = _LOG_INDEX_KEY[:-1], os.urandom(16).hex()
    text = json.dumps({**build, "log_index": stand_in}, sort_keys=True, separators=(",", ":"))
    head, tail = text.split(f'{key}"{stand_in}"')  # once: a top-level key, a random value (a string's quotes escaped)
    return f"{head}{key}{log_index_json}{tail}\n".encode()


def iter_log_lines(entries: Iterable[LogEntry]) -> Iterator[str]:
    """The lines of ``build.log`` for ``entries``, without newlines."""
    for e in entries:
        yield from e.lines()


def without_log_index(text: str) -> tuple[dict[str, Any], str] | None:
    """build.json (as :meth:`BuildResult.write` writes it: compact) parsed without its ``log_index``, and the
    index's JSON text, parsed only when the log is used; None when the text is not in that form (then the
    caller parses it whole).

    The index (a row per log message: a thousand small lists for a MobileNetV2) is most of the file; a cache
    hit never reads it, and parsing it made every entry's load 3x slower and left 1,200 objects per engine
    for the garbage collector to scan for the rest of the session.  Its rows hold no brackets, so the
    array ends at the first ``]]``; the key must occur once, and the rest must parse with ``log_index``
    null at the top level, else this declines.
    """
    start = text.find(_LOG_INDEX_KEY)
    if start < 0 or text.find(_LOG_INDEX_KEY, start + 1) >= 0:
        return None
    start += len(_LOG_INDEX_KEY) - 1
    end = text.find("]]", start)
    if text.startswith("[]", start):
        end = start  # an empty index: "[]" is its whole text
    if end < 0:
        return None
    try:
        build = json.loads(text[:start] + "null" + text[end + 2 :])
    except ValueError:
        return None
    if not isinstance(build, dict) or "log_index" not in build or build["log_index"] is not None:
        return None
    return build, text[start : end + 2]


def index_rows(index: list[list[Any]] | str) -> list[list[Any]]:
    """build.json's ``log_index`` rows, parsed from the text :func:`without_log_index` kept (ValueError if bad)."""
    if not isinstance(index, str):
        return index
    rows = json.loads(index)
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 for r in rows):
        raise ValueError("build.json: log_index is not a list of [severity, time, lines] rows")
    return rows


def split_log(folder: Path, text: str, index: list[list[Any]]) -> tuple[LogEntry, ...]:
    """The entries of ``build.log`` (``text``) by build.json's ``log_index`` (ValueError if they disagree)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    log: list[LogEntry] = []
    pos = 0
    for severity, t, count in index:
        chunk = lines[pos : pos + count]
        pos += count
        prefix = f"[{severity}] "
        if len(chunk) != count or not chunk[0].startswith(prefix):
            raise ValueError(f"{folder / LOG_FILE}: does not match the log index in build.json")
        log.append(LogEntry(severity, float(t), "\n".join([chunk[0][len(prefix) :], *chunk[1:]])))
    if pos != len(lines):
        raise ValueError(f"{folder / LOG_FILE}: has {len(lines) - pos} lines more than build.json lists")
    return tuple(log)
