"""Environment capture: what is recorded, and that secrets never reach a bundle."""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
import tarfile

from pytest_trt.audit.bundle import write_bundle
from pytest_trt.audit.environment import ENV_ALLOWLIST, capture_environment, git_state, pip_freeze
from tests.conftest import RTX_VERSION

SECRET = "s3cr3t-V4lue-7f1e9c0d2b"


def _all_bytes(path) -> list[bytes]:
    """Every byte a bundle holds: the raw file, the tar stream, each member, and decompressed members."""
    raw = path.read_bytes()
    out = [raw, gzip.decompress(raw)]
    with tarfile.open(path, "r:gz") as tar:
        for m in tar.getmembers():
            data = tar.extractfile(m).read()
            out.append(data)
            if data[:2] == b"\x1f\x8b":
                out.append(gzip.decompress(data))
    return out


def test_secret_environment_values_never_reach_a_bundle(tmp_path, monkeypatch, mnv2, record_of):
    for name in ("MY_API_TOKEN", "AWS_SECRET_ACCESS_KEY", "TRT_LICENSE_KEY", "PASSWORD", "NGC_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    for name in ENV_ALLOWLIST:  # runners set some of these (tox sets PYTHONHASHSEED)
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = capture_environment(backend="tensorrt-rtx", rootdir=tmp_path, include_hostname=True)
    assert env["env"] == {"CUDA_VISIBLE_DEVICES": "0"}
    path = write_bundle(mnv2, tmp_path / "b", record=record_of(mnv2), environment=env).path
    blobs = _all_bytes(path)
    assert len(blobs) >= 8
    for blob in blobs:
        for encoding in (SECRET.encode(), SECRET.encode("utf-16-le")):
            assert encoding not in blob


def test_only_allowlisted_names_are_read(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("SOMETHING_ELSE", "x")
    env = capture_environment(rootdir=None)
    assert env["env"].get("OMP_NUM_THREADS") == "2"
    assert set(env["env"]) <= set(ENV_ALLOWLIST)


def test_capture_is_stable_and_has_no_clock_or_host(tmp_path):
    one = capture_environment(backend="tensorrt-rtx", rootdir=tmp_path)
    two = capture_environment(backend="tensorrt-rtx", rootdir=tmp_path)
    assert one == two
    assert "hostname" not in one
    assert "hostname" in capture_environment(rootdir=None, include_hostname=True)
    assert one["backend"]["version"] == RTX_VERSION
    assert one["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert one["gpus"] or one["cpu"]["model"]


def test_pip_freeze_is_sorted_without_paths():
    freeze = pip_freeze()
    names = [line.split("==")[0] for line in freeze]
    assert names == sorted(names) and "pytest" in names
    assert all("/" not in line for line in freeze)


def test_git_commit_and_dirty_flag(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "dirty": None}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    (tmp_path / "a.txt").write_text("1")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "-m", "one")
    state = git_state(tmp_path)
    assert state == {"commit": git("rev-parse", "HEAD").strip(), "dirty": False}
    (tmp_path / "untracked.tar.gz").write_text("bundles are not source")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "a.txt").write_text("2")
    assert git_state(tmp_path)["dirty"] is True


def test_pip_freeze_equals_the_metadata_parser_and_reads_a_made_up_distribution(tmp_path, monkeypatch):
    """The header-block reader gives what importlib.metadata's own parser gives, for every installed distribution."""
    from importlib import metadata

    dist_info = tmp_path / "Made_Up.Pkg-3.1.dev2.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: Made_Up.Pkg\nVersion: 3.1.dev2\n"
                                        "Summary: x\n\nName: not-a-header\nVersion: 0\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    expected: dict[str, str] = {}
    for dist in metadata.distributions():  # independent: the e-mail parser over the whole file
        name = dist.metadata["Name"]
        if name:
            canonical = re.sub(r"[-_.]+", "-", name).lower()
            expected.setdefault(canonical, f"{canonical}=={dist.version}")
    freeze = pip_freeze()
    assert freeze == [expected[k] for k in sorted(expected)]
    assert "made-up-pkg==3.1.dev2" in freeze


def test_package_versions_from_the_one_metadata_pass_equal_importlib_metadata():
    """``packages`` and the CUDA wheel versions come from one pass over the installed distributions; each
    equals what importlib.metadata.version finds for the first of its names (an independent lookup)."""
    from importlib import metadata

    from pytest_trt.audit.environment import _packages

    def version(*names: str) -> str | None:
        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return None

    env = capture_environment(rootdir=None)
    assert env["packages"] == {key: version(*names) for key, names in _packages().items()}
    assert env["packages"]["pytest"] == metadata.version("pytest")  # positive control: found at all
    assert env["cuda"]["cudnn"] == version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn")
