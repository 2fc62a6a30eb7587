"""FdCapture: native writes to fd 2 are captured, and fd 2 is restored to whatever it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from pytest_trt.backends.fdcapture import FdCapture


def _fd_target(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def test_captures_raw_fd_writes_and_restores_fd() -> None:
    before = _fd_target(2)
    with FdCapture(2) as cap:
        os.write(2, b"native line 1\nnative line 2\n")
        assert _fd_target(2) != before
    assert _fd_target(2) == before
    assert cap.text == "native line 1\nnative line 2\n"


def test_restores_fd_when_block_raises() -> None:
    before = _fd_target(2)
    cap = FdCapture(2)
    with pytest.raises(RuntimeError, match="boom"):
        with cap:
            os.write(2, b"evidence before the error\n")
            raise RuntimeError("boom")
    assert _fd_target(2) == before
    assert "evidence before the error" in cap.text


def test_not_reentrant() -> None:
    cap = FdCapture(2)
    with cap:
        with pytest.raises(RuntimeError, match="re-entrant"):
            cap.__enter__()


def test_nothing_leaks_to_the_real_stderr_and_later_writes_arrive() -> None:
    # a child process with a real stderr pipe shows what the terminal would see
    code = textwrap.dedent(
        """
        import os
        from pytest_trt.backends.fdcapture import FdCapture
        os.write(2, b"before\\n")
        with FdCapture(2) as cap:
            os.write(2, b"hidden\\n")
        os.write(2, b"after\\n")
        print(repr(cap.text))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.stderr == "before\nafter\n"
    assert proc.stdout.strip() == repr("hidden\n")


def test_works_inside_pytest_fd_capture(capfd: pytest.CaptureFixture[str]) -> None:
    # capfd has replaced fd 2 with its own file: that file must be what fd 2 points to afterwards
    os.write(2, b"seen by capfd 1\n")
    with FdCapture(2) as cap:
        os.write(2, b"seen by FdCapture only\n")
    os.write(2, b"seen by capfd 2\n")
    err = capfd.readouterr().err
    assert err == "seen by capfd 1\nseen by capfd 2\n"
    assert cap.text == "seen by FdCapture only\n"


def test_concurrent_captures_in_threads_are_serialised() -> None:
    before = _fd_target(2)
    texts: dict[int, str] = {}

    def work(i: int) -> None:
        for _ in range(20):
            with FdCapture(2) as cap:
                os.write(2, f"thread {i}\n".encode())
            texts[i] = cap.text

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert texts == {i: f"thread {i}\n" for i in range(4)}
    assert _fd_target(2) == before
