"""The one process-wide TensorRT logger, capturing every message at VERBOSE.

TensorRT keeps a single global logger per process: a second ``Builder`` made
with another logger gets a WARNING ("The logger passed into createInferBuilder
differs from one already registered ... the current new logger is ignored",
seen with TensorRT-RTX 1.7) and its messages may go to the first one.  So each
TensorRT module gets exactly one :class:`CaptureLogger`, and builds point its
sink at their own list.  ``log()`` never raises: an exception escaping into
TensorRT's C++ caller would abort the build or the process.
"""

from __future__ import annotations

import threading
import time
from types import ModuleType
from typing import Any

from pytest_trt.result import LogEntry

_LOGGERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def severity_name(severity: Any) -> str:
    """``Severity.VERBOSE`` -> ``"VERBOSE"`` (works for any enum-like or int)."""
    name = getattr(severity, "name", None)
    if isinstance(name, str):
        return name
    text = str(severity)
    return text.rsplit(".", 1)[-1] if "." in text else text


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
            self._sink: list[LogEntry] | None = None
            self._start = time.perf_counter()
            self.dropped = 0

        def start(self) -> list[LogEntry]:
            self._sink = []
            self._start = time.perf_counter()
            return self._sink

        def stop(self) -> list[LogEntry]:
            sink, self._sink = self._sink, None
            return sink or []

        def log(self, severity: Any, msg: Any) -> None:  # noqa: D401 - TensorRT callback
            try:
                sink = self._sink
                if sink is not None:
                    text = msg if isinstance(msg, str) else str(msg)
                    sink.append(LogEntry(severity_name(severity), time.perf_counter() - self._start, text))
            except BaseException:  # never let anything escape into TensorRT
                self.dropped += 1

    return CaptureLogger
