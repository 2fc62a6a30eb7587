"""Bad input at the command line: one test per case, asserting the exit code and the words the user sees.

Exit codes: 1 verification failed, 3 file error (no such file, a directory, not a log, unreadable model);
never a traceback.  Bundle-level cases use a real TensorRT-RTX build of conv_bn_relu
(``small_signed_bundle``); the hostile files are built by ``tests.audit.hostile``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt.cli import EXIT_FAILED, EXIT_FILE, EXIT_OK

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "trt_logs" / "log_rtx1.7.1_mobilenet_v2_detailed.txt"
#: engine layers of that log, counted by hand in its DETAILED listing (independent of the parser)
LOG_LAYERS = 19


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def _error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The one-line message of a failed command, after checking the exit code and that no traceback leaked."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.startswith("pytest-trt: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.strip()


# -- log parse ------------------------------------------------------------------------------------------


def test_log_parse_of_an_empty_file(tmp_path):
    (tmp_path / "build.log").write_bytes(b"")
    msg = _error(cli("log", "parse", tmp_path / "build.log"), EXIT_FILE)
    assert msg == f"pytest-trt: {tmp_path / 'build.log'}: is empty (0 bytes): not a build log; was the build's " \
                  "output redirected to this file?"


def test_log_parse_of_a_binary_file(tmp_path, small_build):
    path = tmp_path / "engine.plan"
    path.write_bytes(small_build.engine)  # what users mix up with the log
    msg = _error(cli("log", "parse", path), EXIT_FILE)
    assert f"{path}: holds NUL bytes: a binary file, not a text build log" in msg


def test_log_parse_of_a_bundle_tar_gz(small_signed_bundle):
    msg = _error(cli("log", "parse", small_signed_bundle), EXIT_FILE)
    assert f"{small_signed_bundle}: is gzip-compressed data (an audit bundle? use 'pytest-trt bundle show'" in msg


def test_log_parse_of_a_plain_tar(tmp_path):
    import io
    import tarfile

    path = tmp_path / "logs.tar"
    with tarfile.open(path, "w") as tar:
        tar.addfile(tarfile.TarInfo("build.log"), io.BytesIO(b""))
    msg = _error(cli("log", "parse", path), EXIT_FILE)
    assert f"{path}: is a tar archive, not a text build log; extract the log first" in msg


def test_log_parse_of_a_directory_says_directory(tmp_path):
    msg = _error(cli("log", "parse", tmp_path), EXIT_FILE)
    assert msg == f"pytest-trt: {tmp_path}: is a directory, not a build log"


def test_log_parse_of_text_that_is_not_a_trt_log():
    readme = ROOT / "README.md"
    msg = _error(cli("log", "parse", readme), EXIT_FILE)
    assert f"{readme}: not a TensorRT build log: none of its " in msg and "give the VERBOSE log of a build" in msg


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig", "utf-32"])
def test_log_parse_of_a_unicode_log_decodes_it(tmp_path, encoding):
    """A real log saved as UTF-16 (Windows PowerShell's ``>``) is read, not silently empty."""
    path = tmp_path / f"build-{encoding}.log"
    path.write_bytes(LOG.read_text(encoding="utf-8").encode(encoding))
    proc = cli("log", "parse", "--json", path)
    assert proc.returncode == EXIT_OK, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["layers"] == LOG_LAYERS
    assert doc["record"] == json.loads(cli("log", "parse", "--json", LOG).stdout)["record"]


def test_log_parse_with_a_corrupt_onnx(tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"\x08\x07not a protobuf\xff\xff\xff")
    msg = _error(cli("log", "parse", LOG, "--onnx", model), EXIT_FILE)
    assert f"{model}: not a readable ONNX model (DecodeError: " in msg
    assert msg.endswith("give the .onnx file the engine was built from")


def test_log_parse_with_an_onnx_directory(tmp_path):
    msg = _error(cli("log", "parse", LOG, "--onnx", tmp_path), EXIT_FILE)
    assert msg == f"pytest-trt: {tmp_path}: is a directory, not an ONNX model"


# -- bundle verify / show / diff ------------------------------------------------------------------------


def test_bundle_verify_of_a_directory(tmp_path):
    proc = cli("bundle", "verify", tmp_path)
    assert proc.returncode == EXIT_FILE and "Traceback" not in proc.stderr
    assert proc.stdout.strip() == (f"ERROR   {tmp_path}: is a directory, not a bundle: name its bundles, e.g. "
                                   f"{tmp_path}/*.tar.gz")
    spaced = tmp_path / "my bundles"
    spaced.mkdir()
    proc = cli("bundle", "verify", spaced)
    assert proc.stdout.strip().endswith(f"e.g. '{spaced}'/*.tar.gz")  # as a shell reads it: the glob unquoted


@pytest.mark.parametrize(("content", "why"), [
    (b"", "is empty (0 bytes), not a bundle"),
    (b"hello, not gzip", "not a readable tar.gz archive"),
])
def test_bundle_verify_of_a_file_that_is_no_bundle(tmp_path, content, why):
    path = tmp_path / "b.tar.gz"
    path.write_bytes(content)
    proc = cli("bundle", "verify", path)
    assert proc.returncode == EXIT_FAILED and "Traceback" not in proc.stderr
    assert proc.stdout.startswith(f"FAILED  {path}: {why}")


def test_bundle_verify_of_a_tar_bomb(tmp_path):
    from tests.audit.hostile import tar_bomb

    bomb = tar_bomb(tmp_path / "bomb.tar.gz", member="environment.json", declared=2 << 30, zeros_mib=64)
    proc = cli("bundle", "verify", bomb)
    assert proc.returncode == EXIT_FAILED and "Traceback" not in proc.stderr
    assert proc.stdout.strip() == (
        f"FAILED  {bomb}: member environment.json declares 2,147,483,648 bytes, more than the 4,194,304 accepted "
        "for it (sized from what pytest-trt writes, with margin: a decompression bomb or a damaged header); nothing "
        "was decompressed")


def test_bundle_verify_with_a_missing_public_key(small_signed_bundle, tmp_path):
    proc = cli("bundle", "verify", small_signed_bundle, "--public-key", tmp_path / "nokey.pem")
    assert proc.returncode == EXIT_FILE and "Traceback" not in proc.stderr
    assert f"ERROR   cannot read public key '{tmp_path / 'nokey.pem'}'" in proc.stdout


@pytest.mark.parametrize("command", ["verify", "show", "diff"])
def test_crafted_wrong_typed_bundle_in_every_command(small_signed_bundle, tmp_path, command):
    from tests.audit.hostile import recrafted

    def edit(doc: dict) -> None:
        doc["record"]["memory"] = []

    bad = recrafted(small_signed_bundle, tmp_path / "crafted.tar.gz", {"build.json": edit})
    args = {"verify": (bad,), "show": (bad,), "diff": (small_signed_bundle, bad)}[command]
    proc = cli("bundle", command, *args)
    assert proc.returncode == EXIT_FAILED and "Traceback" not in proc.stdout + proc.stderr
    expected = f"{bad}: member build.json: wrong schema: build.json:record.memory: expected an object, found an array"
    assert expected in proc.stdout + proc.stderr


def test_show_and_diff_of_bundles_without_optional_keys(small_signed_bundle, tmp_path):
    """A valid bundle with every optional key removed or null: shown and compared, never a KeyError."""
    from tests.audit.hostile import recrafted

    def strip_build(doc: dict) -> None:
        doc["record"] = None
        for key in ("backend", "durations", "versions", "device", "extra", "log_index", "engine_bytes"):
            doc["build"].pop(key, None)

    def strip_config(doc: dict) -> None:
        doc["onnx_sha256"] = None
        doc.pop("effective")
        doc["pinned"] = {}

    def strip_environment(doc: dict) -> None:
        doc.clear()

    bare = recrafted(small_signed_bundle, tmp_path / "bare.tar.gz",
                     {"build.json": strip_build, "config.json": strip_config, "environment.json": strip_environment})
    show = cli("bundle", "show", bare)
    assert show.returncode == EXIT_OK, show.stderr
    assert "config: None vNone  precision None" in show.stdout and "record: none in this bundle" in show.stdout
    diff = cli("bundle", "diff", small_signed_bundle, bare)
    assert diff.returncode == EXIT_FAILED and "Traceback" not in diff.stderr, diff.stderr
    assert "note: a bundle has no build record; layers were not compared" in diff.stdout
    assert "build.durations" not in diff.stdout and "config: " in diff.stdout
