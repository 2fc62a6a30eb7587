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

from pytest_trt.common.logtext import LogEntry

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


class Captured:
    """The messages of one build as the logger took them: :meth:`__call__` converts them into LogEntry items once
    (on whichever thread asks first; another thread asking meanwhile waits for the same list)."""

    def __init__(self, raw: list[tuple[Any, float, Any]], start: float) -> None:
        self._raw: list[tuple[Any, float, Any]] | None = raw
        self._start = start
        self._entries: list[LogEntry] = []
        self._lock = threading.Lock()

    def __call__(self) -> list[LogEntry]:
        with self._lock:
            raw, self._raw = self._raw, None
            if raw is not None:
                self._entries = _entries(raw, self._start)
            return self._entries


def _entries(raw: list[tuple[Any, float, Any]], start: float) -> list[LogEntry]:
    names: dict[int, str] = {}
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
            self._start = time.perf_counter()
            self.dropped = 0

        def start(self) -> None:
            self._sink = []
            self._start = time.perf_counter()

        def stop(self) -> list[LogEntry]:
            """End capture; return the messages as LogEntry items."""
            return self.detach()()

        def detach(self) -> Captured:
            """End capture; return the messages, turned into LogEntry items when first asked for (so a build returns
            without converting its thousands of messages: the cache writer's thread converts them for build.log)."""
            raw, self._sink = self._sink, None
            return Captured(raw or [], self._start)

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
