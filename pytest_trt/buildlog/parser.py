"""Streaming reader of TensorRT build logs into a :class:`BuildRecord` (:mod:`.readers` is the public entry).

One pass, one line at a time, nothing kept per line: memory stays bounded by the facts (the last layer
listing, fusion events, warnings), not by the log size.  A log holding several builds (each starts at its
``Original: N layers`` count) gives the last build's record: its listing, fusion events, removed layers and
layer counts; warnings of every build are kept, and ``BuildRecord.builds`` says how many builds the log held.

Loops share one per-line reader: :meth:`LogParser.feed_all` takes any iterable of lines (used by
``parse_lines``); :meth:`LogParser.feed_file` (text) and :meth:`LogParser.feed_binary` (UTF-8 bytes, used by
``read_log``) read 1 MiB chunks (:mod:`.chunks`) and let ``dialects.SCAN_RE`` / ``SCAN_BYTES_RE`` skip, inside
the regex engine, the VERBOSE/INFO lines whose message cannot matter (tactic timings are >90% of a VERBOSE
log); the bytes path decodes only the lines it keeps.  Several times faster, same record
(tests/buildlog/test_buildlog_parser.py compares the paths on the corpus and fuzzed text).

A line is *understood* when it carries a known prefix (``dialects.DIALECTS``; its message is evidence even
when no fact is taken from it, e.g. tactic timings) or continues a block we read (``Layers:``, ``Engine Layer
Information:``, a warning's further lines).  Everything else is counted in ``unparsed_lines``; content never
raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import pytest_trt.buildlog.dialects as d

from ..errors import LogParseError
from .chunks import scan_chunks, universal_newlines
from .listings import ELI_RE, is_detailed_line, listing_layers, metadata_origins, parse_eli_line
from .names import OnnxIndex, origins_from_name
from .parts import FusionEvent, Memory, Message, Subgraph
from .record import BuildRecord
from .sniff import log_encoding

_INTEREST = d.INTEREST_RE
_PREFIX = d.PREFIX_RE.match
_PREFIX_FIRST = d.PREFIX_FIRST
_SCAN = d.SCAN_RE
_SCAN_BYTES = d.SCAN_BYTES_RE
_SEV = d.SEVERITY_NAMES
#: severity codes of every dialect that make a line a warning or an error
_PROBLEM_CODES = frozenset(("W", "E", "F", "WARNING", "ERROR", "INTERNAL_ERROR"))


class LogParser:
    """Feed lines with :meth:`feed_all`, :meth:`feed_file` or :meth:`feed_path`, then take the record with
    :meth:`finish` (:mod:`.readers` does both)."""

    def __init__(self, *, onnx: Any = None, source: str = "tensorrt-log") -> None:
        self.onnx = OnnxIndex.load(onnx) if onnx is not None else None
        self.source = source
        self.total = 0
        self.unparsed = 0
        self.block: str | None = None
        #: ``Engine Layer Information`` and DETAILED listing lines, kept as text: a log of repeated builds lists its
        #: layers many times and only the last listing survives, so tensors are parsed once, by
        #: :func:`.listings.listing_layers`
        self.eli: list[str] = []
        self.detailed: list[str] = []
        self.bindings: list[str] = []
        self.subgraphs: dict[str, tuple[str, ...]] = {}
        self.fusions: list[FusionEvent] = []
        self.removed: list[str] = []
        self.counts: list[tuple[str, int]] = []
        self.memory: dict[str, int] = {}
        self.timings: dict[str, float] = {}
        self.messages: list[Message] = []
        self.calibration: list[str] = []
        self.builds = 0  # "Original: N layers" lines: each starts a build
        self.version: tuple[int, str] | None = None
        self.facts: dict[str, Any] = {}
        self._handlers: dict[str, Callable[[str], bool]] = {
            "fusion": self._fusion, "merge": self._merge, "removing": self._removing,
            "count": self._count, "foreign": self._foreign, "memory": self._memory, "peak": self._peak,
            "calib": self._calib, "timing": self._timing, "version": self._version, "header": self._header,
            "eli": self._eli_line, "detailed": self._detailed_line, "result": self._result,
        }

    # -- the loops -------------------------------------------------------------------------------
    def feed_all(self, lines: Iterable[str]) -> None:
        """Read lines one by one (any iterable; each item is one line, its newline optional)."""
        one = self._line
        total = 0
        for total, raw in enumerate(lines, 1):  # noqa: B007 - total is read after the loop
            one(raw.rstrip("\r\n"))
        self.total += total

    def feed_file(self, f: TextIO, chunk_chars: int = 1 << 20) -> None:
        """Read an open text file in chunks; lines that cannot matter are skipped inside the regex engine.

        Equivalent to :meth:`feed_all` over the file's lines, several times faster on VERBOSE logs,
        where >90% of the lines are tactic timings.
        """
        scan_chunks(iter(lambda: f.read(chunk_chars), ""), "\n", self._scan_text)

    def feed_binary(self, f: BinaryIO, chunk_bytes: int = 1 << 20) -> None:
        """Read an open UTF-8 file in binary chunks: :meth:`feed_file` without decoding the skipped lines.

        The same lines as ``io.TextIOWrapper(f, "utf-8", errors="replace", newline=None)`` gives: CRLF and
        CR end lines, bytes that are not UTF-8 are replaced (a line is decoded on its own, which gives the
        same text since "\n" never belongs to a multi-byte sequence).
        """
        scan_chunks(universal_newlines(f, chunk_bytes), b"\n", self._scan_bytes)

    def feed_path(self, path: str | Path) -> None:
        """Read a log file: UTF-8 ones with :meth:`feed_binary`, others (a byte-order mark, UTF-16) decoded.

        Bytes that are not UTF-8 are replaced, CRLF and CR line ends are accepted; UTF-16 and UTF-32 logs
        with a byte-order mark (and UTF-16 without one) are decoded as such.  A missing or
        unreadable file raises :class:`~pytest_trt.errors.LogParseError` naming the path.
        """
        p = Path(path)
        try:
            encoding = log_encoding(p)
            if encoding == "utf-8":
                with open(p, "rb") as b:
                    self.feed_binary(b)
            else:
                with open(p, encoding=encoding, errors="replace", newline=None) as f:
                    self.feed_file(f)
        except OSError as e:
            raise LogParseError(f"cannot read build log {p}: {e.strerror or e}", path=str(p)) from e

    def _scan_text(self, text: str, start: int, end: int) -> None:
        # ``text[start:end]`` is "\n" followed by whole lines, without the last one's newline
        self.total += text.count("\n", start, end)
        expected = start
        one = self._line
        quiet = self._quiet
        crlf = text.find("\r", start, end) >= 0  # only a text stream without newline translation has them
        for m in _SCAN.finditer(text, start, end):
            if m.start() != expected and self.block is not None:
                self.block = None  # skipped lines were prefixed messages: any block ended there
            prefix, rest = m.group(1, 2)
            if crlf:
                rest = rest.rstrip("\r")
            if prefix:
                quiet(rest)
            else:
                one(rest)
            expected = m.end()
        if expected != end:
            self.block = None

    def _scan_bytes(self, data: bytes, start: int, end: int) -> None:
        # as _scan_text; only the lines the scanner keeps are decoded
        self.total += data.count(b"\n", start, end)
        expected = start
        one = self._line
        quiet = self._quiet
        for m in _SCAN_BYTES.finditer(data, start, end):
            if m.start() != expected and self.block is not None:
                self.block = None
            prefix, rest = m.group(1, 2)
            if prefix:
                quiet(rest.decode("utf-8", "replace"))
            else:
                one(rest.decode("utf-8", "replace"))
            expected = m.end()
        if expected != end:
            self.block = None

    def _line(self, line: str) -> None:
        m = _PREFIX(line) if line[:1] in _PREFIX_FIRST else None
        if m is None and line.endswith("]") and line[:1] in _PREFIX_FIRST:
            m = _PREFIX(line + " ")  # an empty message loses its trailing space: "[04/25/2026-00:54:25] [I]"
        if m is None:
            if not self._continuation(line):
                self.unparsed += 1
            return
        start = m.end()
        code = m.group(m.lastindex or 0)
        if code in _PROBLEM_CODES:
            self.messages.append(Message(_SEV[code], line[start:]))
            self.block = "message"
        elif self.block is not None:
            self.block = None
        h = _INTEREST.match(line, start)
        if h is not None and h.lastgroup is not None:
            self._handlers[h.lastgroup](line[start:])

    def _quiet(self, message: str) -> None:
        """:meth:`_line` for a line the scanner found a VERBOSE/INFO prefix on (the dialects exclude each
        other, so it is the prefix :data:`dialects.PREFIX_RE` finds): only its message is read."""
        if self.block is not None:
            self.block = None
        h = _INTEREST.match(message)
        if h is not None and h.lastgroup is not None:
            self._handlers[h.lastgroup](message)

    def _continuation(self, line: str) -> bool:
        block = self.block
        if block == "eli" and line.startswith("Layer("):
            return self._eli_line(line)
        if block == "detailed":
            if line.startswith("Name: "):
                return self._detailed_line(line)
            if line in ("I/O Tensors:", "Engine Metadata:", "Bindings:"):
                return self._header(line)
        if block == "bindings" and line.strip():
            self.bindings.append(line.strip())
            return True
        if block == "io":
            if line.startswith(" Name: "):
                self.bindings.append(line[7:].split(",", 1)[0])
                return True
            if line == "Engine Metadata:":
                return self._header(line)
        if block in ("meta", "config") and line.startswith(" "):
            return True
        if block == "message" and line.strip():
            last = self.messages[-1]
            self.messages[-1] = Message(last.severity, f"{last.text}\n{line}")
            return True
        if not line.strip():
            return True
        if line.startswith("&&&&"):
            return self._banner(line)
        if line.startswith("Layer(") and parse_eli_line(line) is not None:  # a block whose header was cut off
            self.block = "eli"
            return self._eli_line(line)
        return False

    # -- handlers: each takes the message text and says whether it understood it -------------------
    def _fusion(self, msg: str) -> bool:
        m = d.FUSION_RE.match(msg)
        if m is None:
            return False
        if m["cw"] is not None:  # 7.x: "Fusing convolution weights from A with scale B"
            self.fusions.append(FusionEvent(m["pass"], m["cw"], m["cs"]))
        else:
            self.fusions.append(FusionEvent(m["pass"], m["a"], m["b"]))
        return True

    def _merge(self, msg: str) -> bool:
        m = d.MERGE_RE.match(msg)
        if m is None:
            return False
        self.fusions.append(FusionEvent(None, m["a"], m["b"], kind="horizontal"))
        return True

    def _removing(self, msg: str) -> bool:
        self.removed.append(msg[9:])
        return True

    def _count(self, msg: str) -> bool:
        m = d.LAYER_COUNT_RE.match(msg)
        if m is None:
            return False
        if m["stage"] == "Original":  # a new build: the previous build's listing and events are not this one's
            self.builds += 1
            self.eli.clear()
            self.detailed.clear()
            self.fusions.clear()
            self.removed.clear()
            self.counts.clear()
        self.counts.append((m["stage"], int(m["n"])))
        return True

    def _foreign(self, msg: str) -> bool:
        m = d.FOREIGN_META_RE.match(msg)
        if m is None:
            return False
        origins = metadata_origins(m["meta"]) or origins_from_name(m["name"], onnx=self.onnx)
        self.subgraphs.pop(m["name"], None)  # re-insert: the latest pass comes last
        self.subgraphs[m["name"]] = origins
        return True

    def _memory(self, msg: str) -> bool:
        for field, rx in d.MEMORY_PATTERNS:
            m = rx.match(msg)
            if m is not None:
                self.memory[field] = int(m.group(1))
                return True
        return False

    def _peak(self, msg: str) -> bool:
        m = d.PEAK_MEMORY_RE.match(msg)
        if m is None:
            return False
        self.memory["peak_cpu_mib"], self.memory["peak_gpu_mib"] = int(m.group(1)), int(m.group(2))
        return True

    def _timing(self, msg: str) -> bool:
        for key, rx in d.TIMING_PATTERNS:
            m = rx.search(msg)
            if m is not None:
                try:
                    self.timings[key] = float(m.group(1))
                except ValueError:
                    return False
                return True
        return False

    def _calib(self, msg: str) -> bool:
        if d.CALIBRATION_RE.match(msg) is None:
            return False
        self.calibration.append(msg.rstrip())
        self._timing(msg)
        self._version(msg)
        return True

    def _version(self, msg: str) -> bool:
        for rank, rx in d.VERSION_PATTERNS:
            m = rx.search(msg)
            if m is not None:
                gd = m.groupdict()
                self._set_version(rank, gd.get("v") or d.version_from_tag(gd["tag"]))
                return True
        for key, rx in (("tool_version", d.TOOL_VERSION_RE), ("precision_flags", d.PRECISION_FLAGS_RE),
                        ("engine_size_mib", d.ENGINE_SIZE_RE)):
            m = rx.match(msg)
            if m is not None:
                if key == "tool_version":
                    self.facts["tool"] = "polygraphy"
                self.facts[key] = float(m.group(1)) if key == "engine_size_mib" else m.group(1)
                return True
        return False

    def _set_version(self, rank: int, version: str) -> None:
        if self.version is None or rank >= self.version[0]:
            self.version = (rank, version)

    def _banner(self, line: str) -> bool:
        m = d.BANNER_RE.match(line)
        if m is None:
            return False
        self.facts["tool"] = m["tool"]
        if m["tag"]:
            self._set_version(3, d.version_from_tag(m["tag"]))
        if m["result"] != "RUNNING":
            self.facts["result"] = m["result"]
        return True

    def _result(self, msg: str) -> bool:
        m = d.POLYGRAPHY_RESULT_RE.match(msg)
        if m is not None:
            self.facts["result"] = m["result"]
        return m is not None

    def _header(self, msg: str) -> bool:
        block = d.BLOCK_HEADERS.get(msg.strip())
        if block == "eli":
            self.eli.clear()
        elif block == "detailed":
            self.detailed.clear()
        elif block in ("io", "bindings"):
            self.bindings.clear()
        self.block = block
        return block is not None

    def _eli_line(self, text: str) -> bool:
        if ELI_RE.match(text) is None:  # what parse_eli_line requires, without parsing the tensors yet
            return False
        self.eli.append(text)
        self.block = "eli"
        return True

    def _detailed_line(self, text: str) -> bool:
        if not is_detailed_line(text):  # what parse_detailed_line requires, without parsing the tensors yet
            return False
        self.detailed.append(text)
        self.block = "detailed"
        return True

    # -- the record -------------------------------------------------------------------------------
    def finish(self) -> BuildRecord:
        """The record of everything fed so far."""
        layers, exact = listing_layers(self.detailed, self.eli, self.subgraphs, self.onnx)
        version = self.version[1] if self.version else None
        return BuildRecord(
            source=self.source,
            layers=layers,
            subgraphs=tuple(Subgraph(n, o) for n, o in self.subgraphs.items()),
            fusion_events=tuple(self.fusions),
            layer_counts=tuple(self.counts),
            memory=Memory(**self.memory),
            timings=dict(self.timings),
            messages=tuple(self.messages),
            calibration=tuple(self.calibration),
            backend="tensorrt" if version else None,
            backend_version=version,
            origins_exact=exact,
            unparsed_lines=self.unparsed,
            total_lines=self.total,
            bindings=tuple(self.bindings),
            removed_layers=tuple(self.removed),
            tool=self.facts.get("tool"),
            tool_version=self.facts.get("tool_version"),
            result=self.facts.get("result"),
            precision_flags=self.facts.get("precision_flags"),
            engine_size_mib=self.facts.get("engine_size_mib"),
            builds=max(1, self.builds),
        )

