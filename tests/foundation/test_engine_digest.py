"""The engine's sha256 is started on a thread when a build returns and handed on; build.log's layout.

Issue #14: the 14.7 MB engine's sha256 (~7 ms) is taken off the cache write's critical path by
starting it the moment ``build_serialized_network`` returns; the log is formatted without splitting
every message.  These tests pin what those changes must keep: the digest is the engine's sha256
(checked with hashlib, independently), it reaches the result the backend returns, and build.log's
bytes are the documented layout.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

from pytest_trt.artifact import LogEntry, format_log, split_log
from pytest_trt.common.filehash import EngineDigest

ENTRIES = (
    LogEntry("INFO", 0.0, "one"),
    LogEntry("VERBOSE", 0.25, "two\n  continued\n  and again"),
    LogEntry("WARNING", 0.5, ""),
    LogEntry("ERROR", 0.75, "ends with a newline\n"),
    LogEntry("VERBOSE", 1.0, "[ONNX Layer: conv_dw][ONNX Layer: relu6]"),
)
#: written out by hand: "[SEVERITY] " opens a message, its continuation lines are unprefixed
EXPECTED = (
    "[INFO] one\n"
    "[VERBOSE] two\n  continued\n  and again\n"
    "[WARNING] \n"
    "[ERROR] ends with a newline\n\n"
    "[VERBOSE] [ONNX Layer: conv_dw][ONNX Layer: relu6]\n"
)


def test_build_log_layout_is_one_prefix_per_message() -> None:
    assert format_log(ENTRIES) == EXPECTED
    assert format_log(iter(ENTRIES)) == EXPECTED  # any iterable, read once
    assert format_log(()) == ""


def test_build_log_reads_back_into_the_same_entries(tmp_path: Path) -> None:
    index = [[e.severity, e.time, e.text.count("\n") + 1] for e in ENTRIES]
    assert split_log(tmp_path, format_log(ENTRIES), index) == ENTRIES


def test_engine_digest_is_the_sha256_of_the_bytes() -> None:
    data = bytes(range(256)) * 40_000  # 10 MB: long enough that the thread is still hashing when asked
    digest = EngineDigest(data)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()  # asking again gives the same value


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None, reason="needs tensorrt-rtx (pip install tensorrt-rtx)")
def test_a_real_rtx_build_hands_its_running_digest_to_the_result(tmp_path: Path) -> None:
    from examples.models import write_all
    from pytest_trt.backends.registry import create_backend
    from pytest_trt.config import BuildConfig, Profile

    onnx = write_all(tmp_path / "models")["mobilenet_v2"]
    config = BuildConfig(name="mnv2", onnx=onnx, profiles=[Profile(input=((1, 3, 32, 32), (2, 3, 32, 32), (4, 3, 32, 32)))])
    result = create_backend("tensorrt-rtx").build_config(config)
    assert result.log, "the returned result carries the captured log"
    pending = result.pending_engine_digest()
    assert pending is not None, "the engine's sha256 must already be on its way when build() returns"
    assert result.engine_sha256 == hashlib.sha256(result.engine).hexdigest()
    assert result.pending_engine_digest() is None  # waited for once; the value is kept
    assert result.engine_sha256 == hashlib.sha256(result.engine).hexdigest()


EXIT_SCRIPT = """
import sys
from pathlib import Path
from pytest_trt.config import BuildConfig, Profile
from pytest_trt.engines.provider import EngineProvider
from pytest_trt.testing import FakeBackend
from pytest_trt.testing.models import write_classifier

onnx = write_classifier(Path(sys.argv[1]) / "m.onnx")
config = BuildConfig(name="m", onnx=onnx, profiles=[Profile(x=((1, 8), (2, 8), (4, 8)))])
provider = EngineProvider("fake", cache_dir=Path(sys.argv[1]) / "cache", build=True, backend=FakeBackend())
engine = provider.get(config)
print(provider.key_for(config), engine.result.engine_sha256)
# no flush(): the process ends with the cache entry's writer maybe still running
"""


def test_a_cache_entry_being_written_when_the_process_ends_is_completed(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from pytest_trt.testing.models import write_classifier

    write_classifier  # noqa: B018 - the script imports it; fail here if it moved
    proc = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    key, engine_sha = proc.stdout.split()
    entry = tmp_path / "cache" / key[:2] / key
    files = json.loads((entry / "entry.json").read_text())["files"]
    assert files["engine.plan"] == engine_sha == hashlib.sha256((entry / "engine.plan").read_bytes()).hexdigest()
    staging = tmp_path / "cache" / "tmp"
    assert not staging.exists() or not any(staging.iterdir()), "no half-written entry is left behind"


def test_a_failed_engine_write_publishes_no_cache_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from pytest_trt import artifact
    from pytest_trt.common import fileio
    from pytest_trt.engines.cache import EngineCache

    result = artifact.BuildResult(
        backend="fake", engine=b"\x01" * 100_000, log=ENTRIES, config={"name": "m"}, effective_config={},
        config_hash="c" * 64, onnx_sha256="0" * 64, durations={"build": 0.1}, versions={}, device={"kind": "cpu"},
        backend_version="0.0")

    def full_disk(path: Path, data: bytes) -> None:
        path.write_bytes(data[:10])  # a torn start, then the device is full
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(fileio, "_write_new", full_disk)
    cache = EngineCache(tmp_path / "cache")
    key = "ab" * 32
    with pytest.raises(OSError, match="No space left"):
        cache.store(key, result)
    assert not cache.entry_dir(key).exists()
    assert not any((tmp_path / "cache" / "tmp").iterdir())  # the half-written folder is removed
    monkeypatch.undo()
    stored = cache.store(key, result)  # with room again: a whole entry
    assert hashlib.sha256((stored / "engine.plan").read_bytes()).hexdigest() == hashlib.sha256(result.engine).hexdigest()
    assert cache.load(key) is not None


FORK_SCRIPT = """
import hashlib, os, threading
from pytest_trt.engines import provider as session
from pytest_trt.common.filehash import EngineDigest
from pytest_trt.common.background import Future, on_thread

gate = threading.Event()
slow = Future()
on_thread("slow", (slow, lambda: (gate.wait(), 42)[1]))
session._PENDING.add(slow)  # as a cache entry still being written
data = bytes(range(256)) * 200_000  # 51 MB: still being hashed when the process forks
digest = EngineDigest(data)
pid = os.fork()
if pid == 0:
    try:
        slow.result()
        refused = "waited"
    except RuntimeError:
        refused = "refused"
    session._wait_for_cache_writers()  # what the child's exit runs: must not wait for the parent's writer
    same = digest.hexdigest() == hashlib.sha256(data).hexdigest()
    os.write(1, f"child {refused} {len(session._PENDING)} {same}\\n".encode())
    os._exit(0)
os.waitpid(pid, 0)
gate.set()
print("parent", slow.result(), digest.hexdigest() == hashlib.sha256(data).hexdigest())
session._PENDING.discard(slow)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (POSIX)")
def test_a_forked_child_never_waits_for_its_parents_threads() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["child refused 0 True", "parent 42 True"], proc.stdout
