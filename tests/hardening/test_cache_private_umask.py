"""A shared engine cache written under a private umask (077): another user gets one clear error, not a traceback.

The cache is built by one unprivileged user (uid 65533, umask 077) and used by another (uid 65534), both through
the same interpreter, so the cache key is the same; then made readable with the command the error names.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import needs_ort
from tests.hardening import unprivileged

pytestmark = needs_ort
BUILDER = 65533

SUITE = """
import pytest
from pytest_trt import BuildConfig

CFG = BuildConfig(name="cbr", version="1.0", onnx={onnx!r})

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.engine_sha256
"""


def _as(uid: int, folder: Path, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root, to build the cache as one user and read it as another")
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv is missing: cannot run as other users")
    code = f"import os, sys, pytest; os.umask({umask}); sys.exit(pytest.main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(unprivileged.ROOT), "HOME": str(folder)}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable, "-c", code,
           "-p", "no:cacheprovider", "-q", "-rfEs", "--trt-backend", "onnxruntime", "--trt-cache-dir=cache",
           *args]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_a_cache_built_under_umask_077_names_the_folder_and_the_fix(models):
    folder = unprivileged.world_dir()
    try:
        os.chmod(folder, 0o777)  # both users write their bundles here
        shutil.copyfile(models["conv_bn_relu"], folder / "cbr.onnx")
        (folder / "test_cbr.py").write_text(SUITE.format(onnx=str(folder / "cbr.onnx")))
        for p in (folder / "cbr.onnx", folder / "test_cbr.py"):
            p.chmod(0o644)
        built = _as(BUILDER, folder, "--trt-engine-build", "--trt-bundle-dir=b0", "test_cbr.py", umask=0o077)
        assert built.returncode == 0, built.stdout + built.stderr
        cache = folder / "cache"
        assert (cache.stat().st_mode & 0o777) == 0o700

        for extra in ([], ["--trt-engine-build"]):
            out = _as(unprivileged.NOBODY, folder, *extra, "--trt-bundle-dir=b1", "test_cbr.py")
            text = out.stdout + out.stderr
            assert out.returncode == 1, text
            assert "Traceback" not in text and "PermissionError" not in text, text
            assert f"is not readable by this user (Permission denied: {cache}" in text, text
            assert f"make it readable with 'chmod -R a+rX {cache}'" in text, text

        subprocess.run(["chmod", "-R", "a+rX", str(cache)], check=True)  # the fix the error names
        out = _as(unprivileged.NOBODY, folder, "--trt-bundle-dir=b2", "test_cbr.py")
        assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
    finally:
        shutil.rmtree(folder, ignore_errors=True)
