"""The one process-wide TensorRT logger, capturing every message at VERBOSE.

TensorRT registers one logger per process: a second ``Builder`` made with
another logger logs a WARNING ("The logger passed into createInferBuilder
differs from one already registered ... the current new logger is ignored").
Measured with TensorRT-RTX 1.7, the new logger still receives its build's
messages, but that spurious warning would open every build log after the
first.  So each TensorRT module gets exactly one :class:`CaptureLogger`, and
builds point its sink at their own list.  ``log()`` never raises: an exception escaping into
TensorRT's C++ caller would abort the build or the process.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

from pytest_trt.common.background import Future, on_thread
from pytest_trt.common.logtext import LogEntry, encode_index, format_log, index_of

_LOGGERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def severity_name(severity: Any) -> str:
    """``Severity.VERBOSE`` -> ``"VERBOSE"`` (works for any enum-like or int)."""
    name = getattr(severity, "name", None)
    if isinstance(name, str):
        return name
    text = str(severity)
    return text.rsplit(".", 1)[-1] if "." in text else text


def _text(msg: Any) -> str:
    try:
        return str(msg)
    except Exception as exc:  # keep the entry: a hole in the log would be worse than a placeholder
        return f"<message not convertible to text: {type(exc).__name__}>"


#: while a build runs, messages are converted in batches of at most this many (~0.2 ms of the GIL each) ...
CONVERT_BATCH = 256
#: ... each when no message came since the last look, every this many seconds: a TensorRT build logs most of its
#: messages in bursts (the parse; the first tenth of the build), then works for long stretches without logging
CONVERT_POLL_S = 0.0005
#: with every message converted and none coming, the looks slow down to one per this many seconds (a build of
#: minutes would otherwise wake the thread, and take the GIL, 2,000 times a second for nothing)
CONVERT_IDLE_S = 0.02


class Captured:
    """The messages of one build as the logger takes them, and their conversion into LogEntry items, build.log's text
    and build.json's log index (JSON text).

    Converted once, in batches: by :meth:`convert_while_capturing` on a thread while the build runs (the build's
    own thread only waits for a batch when it logs meanwhile), the rest by whichever thread asks first once
    capture ended (another thread asking meanwhile waits for the same result)."""

    def __init__(self, raw: list[tuple[Any, float, Any]], start: float) -> None:
        self._raw = raw
        self._start = start
        self._done = 0  # messages converted
        self._names: dict[int, str] = {}
        self._entries: list[LogEntry] = []
        self._text_parts: list[str] = []  # build.log's text, per batch
        self._index_parts: list[str] = []  # the log index's rows as JSON text without the brackets, per batch
        self._lock = threading.Lock()
        self._capturing = threading.Event()
        self._capturing.set()
        #: the converting thread's work while the capture lasts (None: not converting during the capture)
        self.converting: Future[None] | None = None

    def _convert(self, limit: int | None = None) -> None:
        """Convert up to ``limit`` more messages (all when None); under the lock."""
        stop = len(self._raw) if limit is None else min(len(self._raw), self._done + limit)
        if stop <= self._done:
            return
        entries = _entries(self._raw[self._done : stop], self._start, self._names)
        text, index = format_log(entries), encode_index(index_of(entries))[1:-1]
        self._entries.extend(entries)  # all or nothing: a failure above leaves these messages to the next batch
        self._text_parts.append(text)
        self._index_parts.append(index)
        self._done = stop

    def end_capture(self) -> None:
        """No message comes any more: the converting thread stops."""
        self._capturing.clear()

    def convert_while_capturing(self) -> None:
        """Convert the messages a batch at a time while the capture lasts, whenever none came since the last look."""
        seen, pause = -1, CONVERT_POLL_S
        while self._capturing.is_set():
            count = len(self._raw)
            if count == seen and count > self._done:
                with self._lock:
                    if not self._capturing.is_set():
                        return
                    self._convert(CONVERT_BATCH)
            # idle (all converted, none new): look less and less often; a new message brings the quick looks back
            pause = min(pause * 2, CONVERT_IDLE_S) if count == seen == self._done else CONVERT_POLL_S
            seen = count
            time.sleep(pause)

    def _finish(self) -> None:
        """Convert what is left; once the capture ended, let go of the messages as the logger took them."""
        self._convert()
        if not self._capturing.is_set():
            self._raw, self._done = [], 0

    def __call__(self) -> list[LogEntry]:
        with self._lock:
            self._finish()
            return self._entries

    def text(self) -> str:
        """build.log's text (:func:`~pytest_trt.common.logtext.format_log` of the entries)."""
        with self._lock:
            self._finish()
            self._text_parts[:] = ["".join(self._text_parts)]
            return self._text_parts[0]

    def index_json(self) -> str:
        """build.json's ``log_index``, encoded as :func:`~pytest_trt.common.logtext.encode_index` encodes it."""
        with self._lock:
            self._finish()
            self._index_parts[:] = [",".join([part for part in self._index_parts if part])]
            return f"[{self._index_parts[0]}]"


def _entries(raw: list[tuple[Any, float, Any]], start: float, names: dict[int, str]) -> list[LogEntry]:
    out = []
    make = tuple.__new__  # LogEntry's own __new__ without its argument parsing (a NamedTuple)
    for severity, t, text in raw:
        code = int(severity)  # faster than hashing the enum object
        name = names.get(code)
        if name is None:
            name = names[code] = severity_name(severity)
        out.append(make(LogEntry, (name, t - start, text if type(text) is str else _text(text))))
    return out


def capture_logger(trt: ModuleType) -> Any:
    """The single capturing logger for the TensorRT module ``trt``."""
    with _LOCK:
        logger = _LOGGERS.get(trt.__name__)
        if logger is None:
            logger = _make_logger_class(trt)()
            _LOGGERS[trt.__name__] = logger
        return logger


def _make_logger_class(trt: ModuleType) -> type:
    class CaptureLogger(trt.ILogger):  # type: ignore[misc, name-defined]
        """Records (severity, seconds since start, text) for the active build."""

        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            # Ask TensorRT for everything; console verbosity is a separate concern.
            try:
                self.min_severity = trt.ILogger.Severity.VERBOSE
            except Exception:  # pragma: no cover - older bindings without the attribute
                pass
            self._sink: list[tuple[Any, float, Any]] | None = None
            self._captured: Captured | None = None
            self._start = time.perf_counter()
            self.dropped = 0

        def start(self, *, convert: bool = False) -> None:
            """Capture into a new list from now on; ``convert``: convert the messages on a thread meanwhile
            (:meth:`Captured.convert_while_capturing`), so that the build's result has its log ready."""
            if self._captured is not None:
                self._captured.end_capture()
            self._sink = []
            self._start = time.perf_counter()
            captured = self._captured = Captured(self._sink, self._start)
            if convert:  # without a thread (a process at its limit) the messages are converted when first used
                captured.converting = Future()
                if not on_thread("log-convert", (captured.converting, captured.convert_while_capturing), inline=False):
                    captured.converting = None

        def stop(self) -> list[LogEntry]:
            """End capture; return the messages as LogEntry items."""
            return self.detach()()

        def detach(self) -> Captured:
            """End capture; return the messages, converted when first asked for (so a build returns without converting
            its thousands of messages: those not converted during the build are, on the cache writer's thread)."""
            captured, self._captured, self._sink = self._captured, None, None
            if captured is None:
                return Captured([], self._start)
            captured.end_capture()
            return captured

        def errors_so_far(self) -> list[str]:
            """Texts of the ERROR and INTERNAL_ERROR messages captured so far."""
            return [str(m) for sev, _, m in self._sink or () if severity_name(sev) in ("ERROR", "INTERNAL_ERROR")]

        def log(self, severity: Any, msg: Any) -> None:  # noqa: D401 - TensorRT callback
            # Called for every VERBOSE message (about 1,200 for a small MobileNetV2): keep it minimal.
            try:
                sink = self._sink
                if sink is not None:
                    sink.append((severity, time.perf_counter(), msg))
            except BaseException:  # never let anything escape into TensorRT
                self.dropped += 1

    return CaptureLogger
