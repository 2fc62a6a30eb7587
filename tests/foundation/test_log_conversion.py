"""A build's messages are converted into build.log's forms on a thread while the build runs.  What must hold: each
message is converted once, in order, whichever thread converts it; build.log's text, build.json's log index and the
entries are those of the messages as logged (read back with an independent regex and ``json``); the converting
thread ends with the capture; a logger started without conversion converts nothing until asked; the build's own
thread converts nothing before the build returns."""

from __future__ import annotations

import enum
import gc
import json
import re
import threading
import time
import types
import uuid
import weakref

import pytest

from pytest_trt.backends import trt_logger
from pytest_trt.common import logtext
from tests.conftest import needs_rtx

#: build.log's first line of a message, read independently of the code under test
OPENER = re.compile(r"^\[(INTERNAL_ERROR|ERROR|WARNING|INFO|VERBOSE)\] ", re.M)


class Severity(enum.IntEnum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


def _logger():
    """A capturing logger made on a stand-in for TensorRT's module (its ILogger base and Severity enum)."""

    class ILogger:
        Severity = Severity

        def __init__(self) -> None:
            pass

    fake = types.SimpleNamespace(__name__=f"fake_trt_{uuid.uuid4().hex}", ILogger=ILogger)
    return trt_logger._make_logger_class(fake)()


def _messages(count: int, offset: int = 0) -> list[tuple[Severity, str]]:
    """Every 7th message spans 3 lines, every 5th is a warning: both change build.log and the index."""
    out = []
    for i in range(offset, offset + count):
        text = f"message {i}" + ("\ncontinued\n  and ended" if i % 7 == 0 else "")
        out.append((Severity.WARNING if i % 5 == 0 else Severity.VERBOSE, text))
    return out


def _count_conversions(monkeypatch) -> list[tuple[int, int, str]]:
    """(thread ident, messages, first text) per conversion of trt_logger's, recorded as they happen."""
    real = trt_logger._entries
    calls: list[tuple[int, int, str]] = []

    def counting(raw, start, names):
        calls.append((threading.get_ident(), len(raw), str(raw[0][2]) if raw else ""))
        return real(raw, start, names)

    monkeypatch.setattr(trt_logger, "_entries", counting)
    return calls


def _wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.002)
    return condition()


def _check_forms(captured, logged: list[tuple[Severity, str]]) -> None:
    """The entries, build.log's text and the index of ``captured`` against the messages as logged."""
    entries = captured()
    assert [(e.severity, e.text) for e in entries] == [(s.name, t) for s, t in logged]
    times = [e.time for e in entries]
    assert times == sorted(times) and times[0] >= 0
    text = captured.text()
    assert text == "".join(f"[{s.name}] {t}\n" for s, t in logged)
    starts = [m.start() for m in OPENER.finditer(text)]
    assert len(starts) == len(logged)
    # per message: its severity, its time and how many lines of build.log it holds, read from the text itself
    lines = [text.count("\n", a, b) for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    index = json.loads(captured.index_json())
    assert index == [[s.name, t, n] for (s, _), t, n in zip(logged, times, lines, strict=True)]
    assert captured.index_json() == json.dumps(index, separators=(",", ":"))


def test_messages_logged_in_bursts_are_converted_while_capturing_each_once(monkeypatch):
    calls = _count_conversions(monkeypatch)
    logger = _logger()
    logger.start(convert=True)
    logged: list[tuple[Severity, str]] = []
    for burst in range(3):  # as a build logs: bursts, then quiet stretches
        for severity, text in _messages(700, offset=700 * burst):
            logger.log(severity, text)
            logged.append((severity, text))
        assert _wait_until(lambda: sum(n for _, n, _ in calls) == len(logged)), "not converted while capturing"
    captured = logger.detach()
    assert captured.converting is not None and _wait_until(captured.converting.done, 2.0), "the thread did not end"
    converted = list(calls)
    assert {ident for ident, _, _ in converted} - {threading.get_ident()}, "no batch was converted on the thread"
    assert threading.get_ident() not in {ident for ident, _, _ in converted}
    assert max(n for _, n, _ in converted) <= trt_logger.CONVERT_BATCH
    # each message once, in order: the batches' first messages, read from the texts logged
    firsts = [first for _, _, first in converted]
    starts = [0]
    for _, n, _ in converted[:-1]:
        starts.append(starts[-1] + n)
    assert firsts == [logged[i][1] for i in starts] and starts[-1] + converted[-1][1] == 2100
    _check_forms(captured, logged)
    assert calls == converted, "asking for the forms converted again"


def test_a_logger_started_without_conversion_converts_only_when_asked(monkeypatch):
    calls = _count_conversions(monkeypatch)
    logger = _logger()
    logger.start()
    logged = _messages(600)
    for severity, text in logged:
        logger.log(severity, text)
    time.sleep(0.05)  # as long as a hundred of a converting thread's looks
    assert calls == []
    captured = logger.detach()
    assert captured.converting is None
    _check_forms(captured, logged)
    assert calls == [(threading.get_ident(), 600, logged[0][1])]


def test_the_converting_thread_ends_with_the_capture_and_leaves_the_rest(monkeypatch):
    calls = _count_conversions(monkeypatch)
    logger = _logger()
    logger.start(convert=True)
    first = logger._captured
    logger.start(convert=True)  # a new capture ends the last one's thread
    assert first.converting is not None and _wait_until(first.converting.done, 2.0)
    logged = _messages(40)
    for severity, text in logged:
        logger.log(severity, text)
    captured = logger.detach()
    assert captured.converting is not None and _wait_until(captured.converting.done, 2.0)
    _check_forms(captured, logged)
    assert sum(n for _, n, _ in calls) == 40


def test_a_capture_whose_thread_cannot_start_converts_on_first_use(monkeypatch):
    """At the process's thread limit the capture goes on without its converting thread (run in the build's own
    thread, that loop would never end: the build would never start)."""
    import _thread

    def refused(fn, args):
        raise RuntimeError("can't start new thread")

    calls = _count_conversions(monkeypatch)
    logger = _logger()
    started = threading.Event()

    def start() -> None:
        with monkeypatch.context() as limited:
            limited.setattr(_thread, "start_new_thread", refused)
            logger.start(convert=True)
        started.set()

    helper = threading.Thread(target=start, daemon=True)
    helper.start()
    assert started.wait(5.0), "the capture's start never returned"
    logged = _messages(30)
    for severity, text in logged:
        logger.log(severity, text)
    captured = logger.detach()
    assert captured.converting is None
    _check_forms(captured, logged)
    assert [n for _, n, _ in calls] == [30]


def test_the_converting_thread_looks_less_often_while_idle(monkeypatch):
    pauses: list[float] = []
    real_sleep = time.sleep

    class Clock:  # trt_logger's time module, its sleeps recorded
        perf_counter = staticmethod(time.perf_counter)

        @staticmethod
        def sleep(seconds: float) -> None:
            pauses.append(seconds)
            real_sleep(seconds)

    monkeypatch.setattr(trt_logger, "time", Clock)
    calls = _count_conversions(monkeypatch)
    logger = _logger()
    logger.start(convert=True)
    for severity, text in _messages(10):
        logger.log(severity, text)
    assert _wait_until(lambda: trt_logger.CONVERT_IDLE_S in pauses), "the looks never slowed down"
    idle = list(pauses)
    logger.log(Severity.INFO, "one more")
    assert _wait_until(lambda: sum(n for _, n, _ in calls) == 11), "a message after the idle stretch was not converted"
    after = pauses[len(idle):]
    captured = logger.detach()
    # from the quick look, doubling up to the idle pause once all was converted; quick looks again for a new message
    before = idle[: idle.index(trt_logger.CONVERT_IDLE_S) + 1]
    ramp = before[len(before) - 1 - before[::-1].index(trt_logger.CONVERT_POLL_S * 2) :]  # the last ramp's start
    steps = zip(ramp, ramp[1:], strict=False)
    assert all(b == min(2 * a, trt_logger.CONVERT_IDLE_S) for a, b in steps) and len(ramp) >= 5, ramp
    assert trt_logger.CONVERT_POLL_S in after
    assert len(captured()) == 11


def test_the_messages_as_logged_are_let_go_once_converted_after_the_capture():
    class Message:  # a message that is not a str is converted with str(); the entry keeps only that text
        def __str__(self) -> str:
            return "an object's message"

    logger = _logger()
    logger.start(convert=True)
    message = Message()
    alive = weakref.ref(message)
    logger.log(Severity.INFO, message)
    logger.log(Severity.VERBOSE, "a text")
    del message
    captured = logger.detach()
    assert captured.text() == "[INFO] an object's message\n[VERBOSE] a text\n"
    gc.collect()
    assert alive() is None, "the build's messages are kept beside their conversion"
    assert captured.index_json().startswith('[["INFO",') and len(captured()) == 2


def test_messages_converted_in_several_batches_give_the_same_forms_as_one():
    raw = [(severity, 100.0 + i / 64, text) for i, (severity, text) in enumerate(_messages(1000))]
    whole = trt_logger.Captured(list(raw), 100.0)
    batched = trt_logger.Captured(list(raw), 100.0)
    with batched._lock:
        for _ in range(3):
            batched._convert(trt_logger.CONVERT_BATCH)
    assert batched.index_json() == whole.index_json() and batched.text() == whole.text()
    assert batched() == whole() and len(whole()) == 1000
    assert json.loads(whole.index_json())[7] == ["VERBOSE", pytest.approx(7 / 64), 3]


def test_captured_messages_are_converted_once_whichever_thread_asks():
    raw = [(Severity.VERBOSE if i % 3 else Severity.ERROR, 10.0 + i / 1000, f"message {i}") for i in range(5000)]
    captured = trt_logger.Captured(raw, 10.0)
    got: list[list] = []
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        got.append(captured())

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got), "each thread converted the messages itself"
    assert [(e.severity, e.text) for e in got[0][:3]] == [("ERROR", "message 0"), ("VERBOSE", "message 1"),
                                                          ("VERBOSE", "message 2")]
    assert got[0][4999].time == pytest.approx(4.999) and len(got[0]) == 5000
    assert captured() is got[0]


@pytest.mark.parametrize("build", [
    {"schema": 1, "a": "é", "extra": {"log_index": [[1]], "z": None}, "durations": {"build": 0.1}},
    {"log_index": None},
    {"b": [1.5, 2e-07, 10**20], "c": "\u2028"},
])
@pytest.mark.parametrize("rows", [[], [("VERBOSE", 0.000123, 1), ("ERROR", 12.5, 3)]])
def test_build_json_with_an_encoded_log_index_is_the_plain_encoding(build, rows):
    index_json = json.dumps(rows, separators=(",", ":"))
    whole = {**build, "log_index": rows}
    plain = (json.dumps(whole, sort_keys=True, separators=(",", ":")) + "\n").encode()
    assert logtext.encode_build_json({**build, "log_index": None}, log_index_json=index_json) == plain
    assert logtext.encode_build_json(whole) == plain


@needs_rtx
def test_a_real_builds_messages_are_converted_off_its_thread_once(tmp_path, monkeypatch):
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.engines.cache import EngineCache
    from tests.foundation.test_cache_write_path import KEY, _example_config

    backend = create_backend("tensorrt-rtx")
    config = _example_config(tmp_path)
    backend.build_config(config)  # warm: the backend's modules load outside the count
    calls = _count_conversions(monkeypatch)
    result = backend.build_config(config)
    during = list(calls)
    assert during, "no message was converted while the build ran"
    assert threading.get_ident() not in {ident for ident, _, _ in during}, "the build's thread converted messages"
    folder = EngineCache(tmp_path / "cache").store(KEY, result)
    text = (folder / "build.log").read_text(encoding="utf-8")
    count = len(OPENER.findall(text))
    assert count > 500 and sum(n for _, n, _ in calls) == count == len(result.log), "a message converted twice"
    build = json.loads((folder / "build.json").read_bytes())
    assert [row[0] for row in build["log_index"]] == OPENER.findall(text)
    assert sum(row[2] for row in build["log_index"]) == text.count("\n")
    assert result.log_text() == text
    assert len(calls) - len(during) <= 1, "what the build left was converted in more than one go"
