"""Golden integrity in a pytest session (pytester): an output named 'out/y' approved and checked, a damaged golden
failing the session within seconds with the file's name, and an APPROVALS.jsonl folder failing the approval with a
plain message while the golden stays as it was."""

from __future__ import annotations

import time

import pytest
from test_golden_integrity import write_slash_model

pytest.importorskip("onnxruntime")

TEST = '''
import numpy as np
import pytest
from pytest_trt import BuildConfig, GoldenDataset, Profile

SLASH = BuildConfig(name="slash", onnx="models/slash.onnx", profiles=[Profile(x=((1, 4), (8, 4), (16, 4)))])
DATA = GoldenDataset.from_arrays({"x": np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)})

@pytest.mark.trt(SLASH)
def test_slash(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATA, classifier=False)
'''
ARGS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--trt-backend", "onnxruntime", "--trt-engine-build")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "models").mkdir()
    write_slash_model(pytester.path / "models" / "slash.onnx")
    pytester.makepyfile(test_slash=TEST)
    approved = pytester.runpytest_subprocess(*ARGS, "--trt-update-golden", "--trt-approve", "first, CR-1")
    approved.assert_outcomes(passed=1)
    return pytester


def test_slash_outputs_approve_then_check(project: pytest.Pytester) -> None:
    checked = project.runpytest_subprocess(*ARGS)
    checked.assert_outcomes(passed=1)


PREFETCH_COUNTER = """
import pytest
from pytest_trt.common import background, filehash, fileio
from pytest_trt.golden import blocks, integrity

STARTED = []
_on_thread = background.on_thread

def counting(name, *steps, **kwargs):
    STARTED.append(name)
    return _on_thread(name, *steps, **kwargs)

filehash.on_thread = blocks.on_thread = counting

def pytest_sessionfinish(session):
    with open("prefetched.txt", "w") as fh:
        fh.write(f"{STARTED.count('golden-blocks')} {STARTED.count('sha256-prefetch')} {len(integrity._VERIFIERS)} "
                 f"{len(filehash._SHA256_MEMO)}")
"""


def test_golden_blocks_are_checked_early_on_another_core_once(project: pytest.Pytester) -> None:
    project.makeconftest(PREFETCH_COUNTER)
    project.runpytest_subprocess(*ARGS).assert_outcomes(passed=1)
    blocks, whole, left, memo = map(int, (project.path / "prefetched.txt").read_text().split())
    # started when the test began, handed to the check's reader, every block matched: the file's digest is known
    assert (blocks, whole, left) == (1, 0, 0) and memo >= 1


def test_damaged_golden_fails_the_session_within_seconds(project: pytest.Pytester) -> None:
    path = project.path / "golden" / "slash.h5"
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2] + b"\x5a" * 12 + raw[len(raw) // 2 :])
    start = time.monotonic()
    checked = project.runpytest_subprocess(*ARGS, timeout=60)
    assert time.monotonic() - start < 60
    checked.assert_outcomes(failed=1)
    checked.stdout.fnmatch_lines([f"*golden file {path} does not match its approved digest*"])
    assert "Traceback" not in checked.stdout.str()


def test_approval_log_folder_fails_plainly_and_moves_nothing(project: pytest.Pytester) -> None:
    golden = project.path / "golden"
    before = {p.name: p.read_bytes() for p in golden.iterdir() if p.is_file() and not p.name.endswith(".lock")}
    (golden / "APPROVALS.jsonl").unlink()
    (golden / "APPROVALS.jsonl").mkdir()
    before.pop("APPROVALS.jsonl")
    result = project.runpytest_subprocess(*ARGS, "--trt-update-golden", "--trt-approve", "second")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*approval log {golden / 'APPROVALS.jsonl'} is not a file*"])
    assert "Traceback" not in result.stdout.str() and "IsADirectoryError" not in result.stdout.str()
    after = {p.name: p.read_bytes() for p in golden.iterdir() if p.is_file() and not p.name.endswith(".lock")}
    assert after == before
