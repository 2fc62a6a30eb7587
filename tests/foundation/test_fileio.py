"""pytest_trt.common.fileio: atomic writes, directory replace, the one file lock, file sha256."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_trt.common import fileio
from pytest_trt.common.filehash import sha256_file
from pytest_trt.common.fileio import (
    acquire_lock,
    locked,
    replace_directory,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from pytest_trt.errors import LockTimeout

ROOT = Path(__file__).resolve().parents[2]

#: N processes each add 1 to a counter file K times, read-modify-write with a pause in between:
#: only a lock that really excludes the others gives N*K
_COUNTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_trt.common import fileio
    from pytest_trt.common.fileio import locked
    counter, rounds = Path(sys.argv[1]), int(sys.argv[2])
    fileio._FLOCK = sys.argv[3] == "flock"
    for _ in range(rounds):
        with locked(counter.with_name("counter.lock"), what=f"counter {counter}", timeout=60):
            value = int(counter.read_text())
            time.sleep(0.005)
            counter.write_text(str(value + 1))
""")

_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from pytest_trt.common import fileio
    from pytest_trt.common.fileio import acquire_lock
    fileio._FLOCK = sys.argv[2] == "flock"
    held = acquire_lock(Path(sys.argv[1]), what="x", timeout=10)
    print("held", flush=True)
    time.sleep(60)
""")


#: takes the lock at once or fails; prints whether filelock was imported
_TAKE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from pytest_trt.common.fileio import acquire_lock
    acquire_lock(Path(sys.argv[1]), what="x", timeout=0.5).release()
    print("filelock" in sys.modules)
""")


#: POSIX takes flock(2) itself; filelock where the file system has none (and on Windows)
LOCKS = ["flock", "filelock"]


@pytest.fixture(params=LOCKS)
def lock_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(fileio, "_FLOCK", request.param == "flock")
    return str(request.param)


def test_lock_excludes_other_processes(tmp_path: Path, lock_kind: str) -> None:
    counter = tmp_path / "counter"
    counter.write_text("0")
    procs = [subprocess.Popen([sys.executable, "-c", _COUNTER, str(counter), "15", lock_kind], cwd=ROOT)
             for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert counter.read_text() == "45"


def test_lock_timeout_names_what_and_the_lock_file(tmp_path: Path, lock_kind: str) -> None:
    lock_file = tmp_path / "sub" / "thing.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock_file), lock_kind], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockTimeout) as info:
            with locked(lock_file, what="golden file /x/model.h5", timeout=0.2):
                pass
        assert str(info.value) == (f"could not lock golden file /x/model.h5 within 0.2 s: another process holds "
                                   f"{lock_file}; if none does (a killed run), delete that file and run again")
        assert info.value.lock_file == lock_file and info.value.what == "golden file /x/model.h5"
    finally:
        holder.kill()
        holder.wait()
    acquire_lock(lock_file, what="x", timeout=5).release()  # free again once the holder is gone


def test_lock_is_released_by_another_thread(tmp_path: Path, lock_kind: str) -> None:
    import threading

    held = acquire_lock(tmp_path / "k.lock", what="cache key k")
    with pytest.raises(LockTimeout):  # held: a second taker in this process waits too
        acquire_lock(tmp_path / "k.lock", what="cache key k", timeout=0.05)
    worker = threading.Thread(target=held.release)
    worker.start()
    worker.join()
    acquire_lock(tmp_path / "k.lock", what="cache key k", timeout=1).release()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_does_not_keep_its_parents_lock(tmp_path: Path) -> None:
    """A flock belongs to the open file, which a forked child shares: the child closes its copy at fork, so the
    parent's release frees the lock while the child still runs."""
    lock_file = tmp_path / "k.lock"
    held = acquire_lock(lock_file, what="cache key k")
    go_on, stay = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child waits until the parent has looked
        os.read(go_on, 1)
        os._exit(0)
    try:
        held.release()
        other = subprocess.run([sys.executable, "-c", _TAKE, str(lock_file)], cwd=ROOT, capture_output=True,
                               text=True, timeout=60)
        assert other.returncode == 0, other.stderr  # LockTimeout, had the child kept the lock
    finally:
        os.write(stay, b"x")
        os.waitpid(pid, 0)


@pytest.mark.skipif(os.name != "posix", reason="flock(2) is POSIX")
def test_a_posix_lock_is_flock_itself(tmp_path: Path) -> None:
    """filelock probes the folder with a file of its own for every lock it takes (~0.6 ms of a cache miss's
    critical path): on POSIX the lock is flock(2) on the lock file, filelock is not even imported."""
    taken = subprocess.run([sys.executable, "-c", _TAKE, str(tmp_path / "k.lock")], cwd=ROOT, capture_output=True,
                           text=True, timeout=60)
    assert (taken.returncode, taken.stdout) == (0, "False\n"), taken.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["k.lock"]


@pytest.mark.skipif(os.name != "posix", reason="flock(2) is POSIX")
def test_a_lock_file_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    """Taking a lock never creates or opens a file elsewhere through a link planted at the lock's path."""
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / "k.lock").symlink_to(elsewhere)
    with pytest.raises(OSError):
        acquire_lock(tmp_path / "k.lock", what="cache key k", timeout=0.05)
    assert not elsewhere.exists()


def test_a_file_systems_own_timeout_is_not_a_held_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ETIMEDOUT from a network file system is its error, shown as it is: not "another process holds" the lock."""
    import errno

    real = os.open

    def timed_out(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith("k.lock"):
            raise TimeoutError(errno.ETIMEDOUT, "Connection timed out", str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", timed_out)
    with pytest.raises(TimeoutError) as info:
        acquire_lock(tmp_path / "k.lock", what="cache key k", timeout=0.05)
    assert not isinstance(info.value, LockTimeout) and info.value.errno == errno.ETIMEDOUT


@pytest.mark.skipif(os.name != "posix", reason="flock(2) is POSIX")
def test_without_flock_the_lock_is_filelocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without flock (ENOLCK, as some network file systems answer): filelock's lock, which excludes."""
    import errno
    import fcntl

    real, refused = fcntl.flock, []

    def no_flock_once(fd: int, operation: int) -> None:
        if not refused:
            refused.append(fd)
            raise OSError(errno.ENOLCK, "No locks available")
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", no_flock_once)
    held = acquire_lock(tmp_path / "k.lock", what="cache key k")
    assert refused and type(held).__module__.split(".")[0] == "filelock"
    with pytest.raises(LockTimeout):
        acquire_lock(tmp_path / "k.lock", what="cache key k", timeout=0.05)
    held.release()


def test_atomic_writes_leave_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "a" / "f.json"
    write_json_atomic(target, {"b": 1, "a": [1, 2]})
    assert target.read_bytes() == b'{"a":[1,2],"b":1}\n'
    write_json_atomic(target, {"b": 1}, indent=1)
    assert target.read_text() == '{\n "b": 1\n}\n' and json.loads(target.read_text()) == {"b": 1}
    write_text_atomic(tmp_path / "t.txt", "caf\u00e9")
    assert (tmp_path / "t.txt").read_bytes() == b"caf\xc3\xa9"
    write_bytes_atomic(tmp_path / "r.bin", b"x", mode=0o444)
    assert (tmp_path / "r.bin").stat().st_mode & 0o777 == 0o444
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "f.json", "r.bin", "t.txt"]


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path: Path) -> None:
    from pytest_trt.common.fileio import write_atomic

    target = tmp_path / "f"
    target.write_bytes(b"old")

    def half(fh: object) -> None:
        fh.write(b"half")  # type: ignore[attr-defined]
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        write_atomic(target, half)  # type: ignore[arg-type]
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_replace_directory(tmp_path: Path) -> None:
    target = tmp_path / "entry"

    def fill(content: str) -> object:
        return lambda folder: (folder / "data").write_text(content)

    replace_directory(target, fill("one"))  # type: ignore[arg-type]
    replace_directory(target, fill("two"), staging=tmp_path / "tmp")  # type: ignore[arg-type]
    assert (target / "data").read_text() == "two" and list((tmp_path / "tmp").iterdir()) == []

    def broken(folder: Path) -> None:
        (folder / "data").write_text("partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_directory(target, broken)
    assert (target / "data").read_text() == "two"  # the old folder is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry", "tmp"]  # no temporary folder left


def test_sha256_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc" * 700_000)  # over one 1 MiB read block
    # the coreutils sha256sum of the same file, not this code
    expected = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]
    assert sha256_file(path) == expected == sha256_file(str(path), memo=True)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert sha256_file(empty) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_edited_copy_replaces_on_success_only(tmp_path: Path) -> None:
    from pytest_trt.common.fileio import edited_copy

    path = tmp_path / "g.h5"
    path.write_bytes(b"v1")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale_other = tmp_path / f".other.h5.tmp-{int(dead.stdout)}"  # a dead writer's copy of another file
    stale_other.write_bytes(b"old copy")
    with pytest.raises(RuntimeError):
        with edited_copy(path) as tmp:
            assert tmp.read_bytes() == b"v1" and tmp != path
            tmp.write_bytes(b"half")
            raise RuntimeError("writer failed")
    assert path.read_bytes() == b"v1" and not stale_other.exists()
    with edited_copy(path) as tmp:
        tmp.write_bytes(b"v2")
    assert path.read_bytes() == b"v2" and sorted(p.name for p in tmp_path.iterdir()) == ["g.h5"]
    with edited_copy(tmp_path / "new.h5") as tmp:
        assert not tmp.exists()  # nothing to copy: the caller creates it
        tmp.write_bytes(b"n")
    assert (tmp_path / "new.h5").read_bytes() == b"n"


@pytest.mark.skipif(os.name != "posix", reason="folder fsync is POSIX-only")
@pytest.mark.parametrize("durable", [True, False])
def test_a_durable_atomic_write_fsyncs_the_file_then_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 durable: bool) -> None:
    import stat

    from pytest_trt.common import fileio

    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        synced.append("folder" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    fileio.write_bytes_atomic(tmp_path / "bundle.tar.gz", b"evidence", fsync=durable)
    assert (tmp_path / "bundle.tar.gz").read_bytes() == b"evidence"
    # the file's bytes before the rename, the folder (the rename) after; nothing when not durable
    assert synced == (["file", "folder"] if durable else [])
