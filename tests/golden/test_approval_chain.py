"""The approval log's hash chain: every edited, removed or reordered line is found (the first one reported),
the golden files hold the chain head their line follows, legacy and torn lines are reported without failing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from approval_keys import Key, allowed_signers, log_lines, make_key, needs_ssh_keygen
from golden_engines import OrtEngine

from pytest_trt.config import BuildConfig
from pytest_trt.errors import ApprovalLogWarning
from pytest_trt.golden import signing
from pytest_trt.golden.approve import verify_folder
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.store import GoldenFile
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings, UpdateResult

MakeConfig = Callable[..., BuildConfig]
GENESIS = "0" * 64


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def refresh(golden_dir: Path, config: BuildConfig, dataset: GoldenDataset, reason: str,
            signer: signing.Signer | None = None) -> UpdateResult:
    settings = GoldenSettings(golden_dir=golden_dir, update=True, approve=reason, rootdir=golden_dir.parent,
                              signer=signer)
    result = GoldenCheck(settings, nodeid="tests/test_model.py::test_x").check(OrtEngine(config), dataset=dataset)
    assert isinstance(result, UpdateResult)
    return result


@pytest.fixture
def three(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset) -> list[bytes]:
    """Three unsigned refreshes: tiny gen 1, other gen 1, tiny gen 2."""
    refresh(golden_dir, make_config("tiny"), dataset, "one")
    refresh(golden_dir, make_config("other", seed=1), dataset, "two")
    refresh(golden_dir, make_config("tiny", scale=1.1), dataset, "three")
    return log_lines(golden_dir)


def write(golden_dir: Path, lines: list[bytes]) -> None:
    (golden_dir / "APPROVALS.jsonl").write_bytes(b"".join(raw + b"\n" for raw in lines))


def first_problem(golden_dir: Path, allowed: Path | None = None) -> tuple[int, str, int]:
    report = verify_folder(golden_dir, allowed)
    assert not report.ok
    return report.problems[0].line, report.problems[0].text, len(report.problems)


def test_clean_log_verifies(golden_dir: Path, three: list[bytes]) -> None:
    recs = [json.loads(raw) for raw in three]
    assert [r["prev_sha256"] for r in recs] == [GENESIS, sha(three[0]), sha(three[1])]  # hashlib, independently
    report = verify_folder(golden_dir, None)
    assert report.ok and report.lines == 3 and report.legacy == [] and report.unsigned == [1, 2, 3]
    done = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "golden", "log", "verify", str(golden_dir)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"ok {golden_dir / 'APPROVALS.jsonl'}: 3 line(s), chain intact" in done.stdout
    assert "unsigned line(s): 1-3" in done.stdout


def test_h5_record_holds_the_chain_head(golden_dir: Path, three: list[bytes]) -> None:
    with GoldenFile(golden_dir / "tiny.h5") as g:
        assert [a["prev_sha256"] for a in g.approvals()] == [GENESIS, sha(three[1])]
    with GoldenFile(golden_dir / "other.h5") as g:
        assert [a["prev_sha256"] for a in g.approvals()] == [sha(three[0])]


def test_edited_line_is_the_first_problem(golden_dir: Path, three: list[bytes]) -> None:
    write(golden_dir, [three[0].replace(b'"reason":"one"', b'"reason":"uno"'), three[1], three[2]])
    line, text, _ = first_problem(golden_dir)
    assert line == 2 and text == "line 2 does not follow line 1: line 1 was edited, or a line between them was removed"
    cli = subprocess.run([sys.executable, "-m", "pytest_trt.cli", "golden", "log", "verify", str(golden_dir)],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1
    assert cli.stdout.startswith(f"FAIL {golden_dir / 'APPROVALS.jsonl'}:2: line 2 does not follow line 1")


def test_removed_line(golden_dir: Path, three: list[bytes]) -> None:
    write(golden_dir, [three[0], three[2]])
    line, text, count = first_problem(golden_dir)
    assert (line, text) == (2, "line 2 does not follow line 1: line 1 was edited, or a line between them was removed")
    report = verify_folder(golden_dir, None)  # other.h5's generation 1 lost its line: found from the golden side
    assert any("golden other.h5 [other] generation 1" in p.text and "its line was removed" in p.text
               for p in report.problems)


def test_reordered_lines(golden_dir: Path, three: list[bytes]) -> None:
    write(golden_dir, [three[0], three[2], three[1]])
    line, text, _ = first_problem(golden_dir)
    assert (line, text) == (2, "line 2 follows line 3, not line 1: lines were reordered or a line was removed")


def test_removed_first_line(golden_dir: Path, three: list[bytes]) -> None:
    write(golden_dir, three[1:])
    line, text, _ = first_problem(golden_dir)
    assert line == 1 and "lines before it were removed" in text


def test_removed_last_line_caught_by_h5_head(golden_dir: Path, three: list[bytes]) -> None:
    write(golden_dir, three[:2])  # the chain alone is intact
    line, text, count = first_problem(golden_dir)
    assert line == 0 and count == 1
    assert text.startswith(f"golden tiny.h5 [tiny] generation 2 was approved on chain head {sha(three[1])[:16]}")
    assert "its line was removed" in text


def test_legacy_lines_reported_not_failed(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset) -> None:
    golden_dir.mkdir()
    legacy = [json.dumps({"file": "old.h5", "config": "old", "generation": g, "approver": "x", "reason": "r"},
                         sort_keys=True, separators=(",", ":")).encode() for g in (1, 2)]
    write(golden_dir, legacy)
    refresh(golden_dir, make_config("tiny"), dataset, "chained")
    lines = log_lines(golden_dir)
    assert json.loads(lines[2])["prev_sha256"] == sha(legacy[1])
    report = verify_folder(golden_dir, None)
    assert report.ok and report.legacy == [1, 2]
    assert any(s.startswith("lines 1-2 predate the chain (no prev_sha256): not tamper-evident")
               for s in report.summary())
    write(golden_dir, [*lines, legacy[0]])  # an unchained line after the chain's start is a problem
    line, text, _ = first_problem(golden_dir)
    assert line == 4 and "has no prev_sha256 but follows chained lines" in text


def test_torn_line_stays_chained(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset) -> None:
    refresh(golden_dir, make_config("tiny"), dataset, "one")
    with open(golden_dir / "APPROVALS.jsonl", "ab") as fh:
        fh.write(b'{"file":"tiny.h5","gener')  # a writer killed mid-line
    with pytest.warns(ApprovalLogWarning, match="torn"):
        refresh(golden_dir, make_config("tiny", scale=1.1), dataset, "two")
    lines = log_lines(golden_dir)
    assert lines[1] == b'{"file":"tiny.h5","gener'
    assert json.loads(lines[2])["prev_sha256"] == sha(lines[1])
    report = verify_folder(golden_dir, None)
    assert report.ok and report.unreadable == [2]


def test_two_processes_refreshing_two_goldens_keep_one_chain(golden_dir: Path, make_config: MakeConfig,
                                                             dataset: GoldenDataset, tmp_path: Path) -> None:
    configs = {name: make_config(name, seed=i) for i, name in enumerate(("a", "b"))}
    refresh(golden_dir, configs["a"], dataset, "seed")  # the folder and the model files exist
    script = tmp_path / "refresh.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from pathlib import Path\n"
        "import numpy as np\n"
        "from golden_engines import OrtEngine\n"
        "from pytest_trt.config import BuildConfig, Profile\n"
        "from pytest_trt.golden.dataset import GoldenDataset\n"
        "from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings\n"
        "name, onnx, folder = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])\n"
        "cfg = BuildConfig(name=name, onnx=onnx, profiles=(Profile(x=((1, 8), (16, 8), (16, 8))),))\n"
        "x = np.random.default_rng(42).standard_normal((100, 8)).astype(np.float32)\n"
        "ds = GoldenDataset.from_arrays({'x': x})\n"
        "for i in range(3):\n"
        "    s = GoldenSettings(golden_dir=folder, update=True, approve=f'{name} {i}', rootdir=folder.parent)\n"
        "    GoldenCheck(s).check(OrtEngine(cfg), dataset=ds)\n")
    procs = [subprocess.Popen([sys.executable, str(script), name, str(cfg.onnx), str(golden_dir)])
             for name, cfg in configs.items()]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    report = verify_folder(golden_dir, None)
    assert report.ok and report.lines == 7, report.summary()


@needs_ssh_keygen
def test_signed_lines_checked_against_allowed_signers(golden_dir: Path, make_config: MakeConfig,
                                                      dataset: GoldenDataset, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    alice = make_key(tmp_path / "keys", "alice", "alice@example.com")
    carol = make_key(tmp_path / "keys", "carol", "carol@example.com")
    allowed = allowed_signers(tmp_path / "approvers.allowed_signers", alice)
    signer = signing.preflight(alice.path, allowed, fallback_principal=None)
    refresh(golden_dir, make_config("tiny"), dataset, "one", signer)
    refresh(golden_dir, make_config("tiny", scale=1.1), dataset, "two", signer)
    report = verify_folder(golden_dir, allowed)
    assert report.ok and report.signers == {"alice@example.com": 2}
    lines = log_lines(golden_dir)
    # line 1 re-signed by carol, its bytes otherwise the same chain input: the signature check finds it
    rec: dict[str, Any] = json.loads(lines[0])
    rec = signing.Signer(carol.path, "alice@example.com", Key(carol.email, carol.path).fingerprint).sign_record(rec)
    write(golden_dir, [json.dumps(rec, sort_keys=True, separators=(",", ":")).encode(), lines[1]])
    line, text, _ = first_problem(golden_dir, allowed)
    assert line == 1 and f"signed by key {carol.fingerprint}, which is not in approvers.allowed_signers" in text
    # an edited reason: the signature no longer matches the record (the first problem), and line 2's link breaks
    write(golden_dir, [lines[0].replace(b'"reason":"one"', b'"reason":"uno"'), lines[1]])
    report = verify_folder(golden_dir, allowed)
    assert [p.line for p in report.problems] == [1, 2]
    assert report.problems[0].text.startswith("line 1: the signature does not match the record")
    write(golden_dir, lines)
    unsigned_dir_report = verify_folder(golden_dir, None, require_signed=True)
    assert not unsigned_dir_report.ok and "no allowed-signers file was given" in unsigned_dir_report.problems[0].text


def test_log_verify_cli_json_and_exit_codes(golden_dir: Path, three: list[bytes], tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest_trt.cli", "golden", "log", "verify", *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)

    done = cli(str(golden_dir), "--json")
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["ok"] is True and doc["lines"] == 3 and doc["unsigned"] == [1, 2, 3]
    write(golden_dir, [three[0], three[2], three[1]])
    doc = json.loads(cli(str(golden_dir), "--json").stdout)
    assert doc["ok"] is False and doc["problems"][0]["line"] == 2
    assert cli(str(tmp_path / "nowhere")).returncode == 3
    (tmp_path / "empty").mkdir()
    missing = cli(str(tmp_path / "empty"))
    assert missing.returncode == 3 and "holds no APPROVALS.jsonl" in missing.stderr
    write(golden_dir, three)
    required = cli(str(golden_dir), "--require-signed")
    assert required.returncode == 3 and "--approvers FILE" in required.stderr
