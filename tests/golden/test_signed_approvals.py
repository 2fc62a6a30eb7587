"""Signed approvals: real SSH keys made here, lines checked with ``ssh-keygen -Y verify`` itself, the sign-off rule
(allowed signers, forged names, unsigned lines, the two-person rule with the change author counted once)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from approval_keys import Key, allowed_signers, log_lines, make_key, needs_ssh_keygen, ssh_keygen_verify
from golden_engines import OrtEngine

from pytest_trt.config import BuildConfig
from pytest_trt.errors import GoldenUnapproved
from pytest_trt.golden import signing
from pytest_trt.golden.approvals import held_log
from pytest_trt.golden.approve import ApprovalRefused, cosign
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.store import GoldenFile
from pytest_trt.golden.workflow import CheckResult, GoldenCheck, GoldenSettings, UpdateResult

pytestmark = needs_ssh_keygen
MakeConfig = Callable[..., BuildConfig]


@pytest.fixture
def keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Key]:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))  # no e-mail of the machine's user
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    folder = tmp_path / "keys"
    return {"alice": make_key(folder, "alice", "alice@example.com"),
            "alice2": make_key(folder, "alice2", "alice@example.com"),  # a second key of the same person
            "bob": make_key(folder, "bob", "bob@example.com"),
            "mallory": make_key(folder, "mallory", "mallory@example.com"),
            "carol": make_key(folder, "carol", "carol@example.com")}  # not an allowed signer


@pytest.fixture
def approvers(tmp_path: Path, keys: dict[str, Key]) -> Path:
    return allowed_signers(tmp_path / "approvers.allowed_signers", keys["alice"], keys["alice2"], keys["bob"],
                           keys["mallory"])


def signer(key: Key, approvers: Path) -> signing.Signer:
    return signing.preflight(key.path, approvers, fallback_principal=key.email)


def golden_check(golden_dir: Path, approvers: Path | None = None, **kw: Any) -> GoldenCheck:
    settings = GoldenSettings(golden_dir=golden_dir, rootdir=golden_dir.parent, approvers=approvers, **kw)
    return GoldenCheck(settings, nodeid="tests/test_model.py::test_tiny")


def refresh(golden_dir: Path, engine: OrtEngine, dataset: GoldenDataset, *, key: Key | None, approvers: Path,
            reason: str = "first golden, CR-1", **kw: Any) -> UpdateResult:
    result = golden_check(golden_dir, approvers, update=True, approve=reason,
                          signer=signer(key, approvers) if key else None, **kw).check(engine, dataset=dataset)
    assert isinstance(result, UpdateResult)
    return result


def strict(golden_dir: Path, approvers: Path, required: int = 1, **kw: Any) -> GoldenCheck:
    return golden_check(golden_dir, approvers, require_signed=True, approvals_required=required, **kw)


def failure(check: GoldenCheck, engine: OrtEngine, golden_dir: Path) -> str:
    with pytest.raises(GoldenUnapproved) as info:
        check.check(engine)
    text = str(info.value)
    assert str(golden_dir / "tiny.h5") in text and "approvers.allowed_signers" in text, text
    assert f"signatures read from {golden_dir / 'APPROVALS.jsonl'}" in text, text
    return text


def test_refresh_line_verifies_with_ssh_keygen(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset,
                                               keys: dict[str, Key], approvers: Path, tmp_path: Path) -> None:
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["alice"], approvers=approvers)
    (line,) = log_lines(golden_dir)
    rec = json.loads(line)
    assert rec["principal"] == "alice@example.com" and rec["signature"]["namespace"] == "pytest-trt-approval"
    assert rec["signature"]["key"] == keys["alice"].fingerprint  # ssh-keygen -lf of the .pub
    done = ssh_keygen_verify(line, approvers, tmp_path)
    assert done.returncode == 0, done.stderr
    assert b'Good "pytest-trt-approval" signature for alice@example.com' in done.stdout + done.stderr
    forged = line.replace(b'"first golden, CR-1"', b'"first golden, CR-2"')  # the reason edited after signing
    assert ssh_keygen_verify(forged, approvers, tmp_path).returncode == 255
    assert isinstance(strict(golden_dir, approvers).check(engine), CheckResult)


def test_unsigned_approval_fails_under_require_signed(golden_dir: Path, make_config: MakeConfig,
                                                      dataset: GoldenDataset, approvers: Path) -> None:
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=None, approvers=approvers)
    assert isinstance(golden_check(golden_dir, approvers).check(engine), CheckResult)  # not required: passes
    text = failure(strict(golden_dir, approvers), engine, golden_dir)
    assert "generation 1 needs an approval signature by an allowed signer" in text
    assert "line 1 (refresh) is not signed" in text and "counted: nobody" in text
    assert "--trt-approve-key KEY" in text


def test_git_ssh_signing_key_is_the_default(tmp_path: Path, keys: dict[str, Key]) -> None:
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f"[user]\n\tsigningkey = {keys['alice'].path}\n")
    assert signing.approval_key(None, tmp_path) is None  # a GPG setup: user.signingkey is no SSH key
    gitconfig.write_text(f"[user]\n\tsigningkey = {keys['alice'].path}\n[gpg]\n\tformat = ssh\n")
    assert signing.approval_key(None, tmp_path) == keys["alice"].path
    assert signing.approval_key(keys["bob"].path, tmp_path) == keys["bob"].path  # the option wins
    gitconfig.write_text(f"[user]\n\tsigningkey = key::{keys['alice'].pub}\n[gpg]\n\tformat = ssh\n")
    literal = signing.approval_key(None, tmp_path)
    assert literal is not None and literal.read_text().strip() == keys["alice"].pub


def _replace_line(golden_dir: Path, index: int, rec: dict[str, Any]) -> None:
    lines = log_lines(golden_dir)
    lines[index] = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    (golden_dir / "APPROVALS.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_forged_approver_name_fails_naming_the_file(golden_dir: Path, make_config: MakeConfig,
                                                    dataset: GoldenDataset, keys: dict[str, Key],
                                                    approvers: Path, tmp_path: Path) -> None:
    """mallory (an allowed signer) signs a line claiming to be alice."""
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["mallory"], approvers=approvers)
    rec = json.loads(log_lines(golden_dir)[0])
    as_alice = signing.Signer(keys["mallory"].path, "alice@example.com", keys["mallory"].fingerprint)
    _replace_line(golden_dir, 0, as_alice.sign_record(rec))
    forged = log_lines(golden_dir)[0]
    assert json.loads(forged)["principal"] == "alice@example.com"
    assert ssh_keygen_verify(forged, approvers, tmp_path).returncode == 255  # ssh-keygen agrees it is not alice's
    text = failure(strict(golden_dir, approvers), engine, golden_dir)
    assert "forged approver: the record names alice@example.com but is signed by the key of mallory@example.com" in text


def test_key_not_in_allowed_signers_fails(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset,
                                          keys: dict[str, Key], approvers: Path, tmp_path: Path) -> None:
    engine = OrtEngine(make_config())
    with pytest.raises(signing.SigningFailed, match="is not in the allowed-signers file"):
        signer(keys["carol"], approvers)  # the session refuses it at start
    refresh(golden_dir, engine, dataset, key=None, approvers=approvers)
    rec = json.loads(log_lines(golden_dir)[0])
    carol = signing.Signer(keys["carol"].path, "carol@example.com", keys["carol"].fingerprint)
    _replace_line(golden_dir, 0, carol.sign_record(rec))
    assert ssh_keygen_verify(log_lines(golden_dir)[0], approvers, tmp_path).returncode == 255
    text = failure(strict(golden_dir, approvers), engine, golden_dir)
    assert f"signed by key {keys['carol'].fingerprint}, which is not in approvers.allowed_signers" in text


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_two_allowed_signers_pass(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset,
                                  keys: dict[str, Key], approvers: Path, tmp_path: Path) -> None:
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["alice"], approvers=approvers)
    text = failure(strict(golden_dir, approvers, required=2), engine, golden_dir)
    assert "needs 2 approval signatures by distinct allowed signers" in text and "it has 1" in text
    assert "counted: the change author (alice@example.com)" in text
    assert f"pytest-trt golden approve {golden_dir / 'tiny.h5'} --config tiny" in text
    done = _cli("golden", "approve", str(golden_dir / "tiny.h5"), "--reason", "reviewed deltas, CR-1",
                "--key", str(keys["bob"].path), "--approvers", str(approvers), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "signers counted: 2/2 (the change author (alice@example.com), bob@example.com)" in done.stdout
    refresh_line, cosign_line = log_lines(golden_dir)
    assert ssh_keygen_verify(cosign_line, approvers, tmp_path).returncode == 0
    rec = json.loads(cosign_line)
    assert rec["kind"] == "cosign" and rec["principal"] == "bob@example.com"
    assert rec["refresh_line_sha256"] == hashlib.sha256(refresh_line).hexdigest()
    assert isinstance(strict(golden_dir, approvers, required=2).check(engine), CheckResult)
    with GoldenFile(golden_dir / "tiny.h5") as g:  # the co-signature only read the golden
        assert len(g.approvals()) == 1


def test_one_signer_twice_counts_once(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset,
                                      keys: dict[str, Key], approvers: Path) -> None:
    """An unsigned refresh and bob's co-signature written twice: one signer, not two."""
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=None, approvers=approvers)
    cosign(golden_dir / "tiny.h5", None, "ok", keys["bob"].path, approvers, required=2, tty=False)
    with pytest.raises(ApprovalRefused, match="bob@example.com already signed"):
        cosign(golden_dir / "tiny.h5", None, "ok", keys["bob"].path, approvers, required=2, tty=False)
    first = json.loads(log_lines(golden_dir)[1])
    with held_log(golden_dir) as log:  # by hand
        log.append({k: v for k, v in first.items() if k not in ("signature", "prev_sha256")}, signer(keys["bob"],
                                                                                                      approvers))
    text = failure(strict(golden_dir, approvers, required=2), engine, golden_dir)
    assert "counted: bob@example.com\n" in text and "line 3 (co-signature) by bob@example.com: already counted" in text


def test_self_approval_counts_once_under_two_person_rule(golden_dir: Path, make_config: MakeConfig,
                                                         dataset: GoldenDataset, keys: dict[str, Key],
                                                         approvers: Path, tmp_path: Path) -> None:
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["alice"], approvers=approvers)
    done = _cli("golden", "approve", str(golden_dir / "tiny.h5"), "--reason", "me again",
                "--key", str(keys["alice2"].path), "--approvers", str(approvers), cwd=tmp_path)
    assert done.returncode == 1 and "alice@example.com" in done.stderr and "made the change" in done.stderr
    assert len(log_lines(golden_dir)) == 1
    # written anyway, by hand, with alice's second key: it counts for nobody new
    refresh_line = log_lines(golden_dir)[0]
    record = {"kind": "cosign", "file": "tiny.h5", "config": "tiny", "generation": 1, "reason": "me again",
              "file_sha256": json.loads(refresh_line)["file_sha256"],
              "refresh_line_sha256": hashlib.sha256(refresh_line).hexdigest()}
    with held_log(golden_dir) as log:
        log.append(record, signer(keys["alice2"], approvers))
    assert ssh_keygen_verify(log_lines(golden_dir)[1], approvers, tmp_path).returncode == 0  # a valid signature
    text = failure(strict(golden_dir, approvers, required=2), engine, golden_dir)
    assert "it has 1" in text and "line 2 (co-signature) by alice@example.com: made the change" in text


def test_bundle_signer_key_counts_as_change_author(golden_dir: Path, make_config: MakeConfig,
                                                   dataset: GoldenDataset, keys: dict[str, Key],
                                                   approvers: Path, tmp_path: Path) -> None:
    """alice refreshed in a session whose bundles were signed with bob's key: bob's co-signature is the change's."""
    from pytest_trt.pytest_plugin.golden import _bundle_fingerprint

    assert _bundle_fingerprint(keys["bob"].path) == keys["bob"].fingerprint  # ssh-keygen -lf, independently
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["alice"], approvers=approvers,
            bundle_signer=keys["bob"].fingerprint)
    with pytest.raises(ApprovalRefused, match="bob@example.com .* made the change"):
        cosign(golden_dir / "tiny.h5", None, "ok", keys["bob"].path, approvers, required=2, tty=False)
    rec = {"kind": "cosign", "file": "tiny.h5", "config": "tiny", "generation": 1, "reason": "ok",
           "file_sha256": json.loads(log_lines(golden_dir)[0])["file_sha256"],
           "refresh_line_sha256": hashlib.sha256(log_lines(golden_dir)[0]).hexdigest()}
    with held_log(golden_dir) as log:
        log.append(rec, signer(keys["bob"], approvers))
    text = failure(strict(golden_dir, approvers, required=2), engine, golden_dir)
    assert "line 2 (co-signature) by bob@example.com: made the change, already counted once" in text
    # the same co-signature by a key no session used counts
    done = cosign(golden_dir / "tiny.h5", "tiny", "ok", keys["mallory"].path, approvers, required=2, tty=False)
    assert done.after.counted == ["the change author (alice@example.com)", "mallory@example.com"]
    assert isinstance(strict(golden_dir, approvers, required=2).check(engine), CheckResult)


def test_commit_author_counts_as_change_author(golden_dir: Path, make_config: MakeConfig, dataset: GoldenDataset,
                                               keys: dict[str, Key], approvers: Path, tmp_path: Path) -> None:
    """bob committed the refreshed golden that alice signed: bob is its change author too."""
    engine = OrtEngine(make_config())
    refresh(golden_dir, engine, dataset, key=keys["alice"], approvers=approvers)
    git = ["git", "-C", str(golden_dir)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "tiny.h5", "APPROVALS.jsonl"], check=True)
    subprocess.run([*git, "-c", "user.name=Bob", "-c", "user.email=bob@example.com", "commit", "-q", "-m", "golden"],
                   check=True)
    with pytest.raises(ApprovalRefused, match="made the change"):
        cosign(golden_dir / "tiny.h5", None, "ok", keys["bob"].path, approvers, required=2, tty=False)
    done = cosign(golden_dir / "tiny.h5", None, "ok", keys["mallory"].path, approvers, required=2, tty=False)
    assert len(done.after.counted) == 2
    assert isinstance(strict(golden_dir, approvers, required=2).check(engine), CheckResult)


PLUGIN_TEST = """
from pathlib import Path
import numpy as np
import pytest
from pytest_trt.testing import write_classifier
from pytest_trt import BuildConfig, Profile
from pytest_trt.golden.dataset import GoldenDataset

MODEL = write_classifier(Path(__file__).parent / "tiny.onnx")
TINY = BuildConfig(name="tiny", onnx=MODEL, profiles=[Profile(x=((1, 8), (16, 8), (16, 8)))])
DATASET = GoldenDataset.from_arrays({"x": np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32)})

@pytest.mark.trt(TINY)
def test_tiny(trt_engine, trt_golden):
    trt_golden.check(trt_engine, dataset=DATASET)
"""


def test_plugin_signs_refreshes_and_enforces_the_two_person_rule(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(pytester.path / "gitconfig"))
    keys = {n: make_key(pytester.path / "keys", n, f"{n}@example.com") for n in ("alice", "bob")}
    allowed_signers(pytester.path / "approvers.allowed_signers", *keys.values())
    pytester.makeini("[pytest]\ntrt_approvers = approvers.allowed_signers\ntrt_require_signed_approval = true\n"
                     "trt_approvals_required = 2\n")
    pytester.makepyfile(test_tiny=PLUGIN_TEST)
    run = ("--trt-backend", "onnxruntime", "--trt-engine-build", "-p", "no:cacheprovider")
    update = (*run, "--trt-update-golden", "--trt-approve", "first golden, CR-1")
    unsigned = pytester.runpytest_subprocess(*update)
    assert unsigned.ret == pytest.ExitCode.USAGE_ERROR
    assert "this project requires signed approvals" in unsigned.stderr.str() and "--trt-approve-key=" in \
        unsigned.stderr.str()
    signed = pytester.runpytest_subprocess(*update, f"--trt-approve-key={keys['alice'].path}")
    signed.assert_outcomes(passed=1)
    signed.stdout.fnmatch_lines([f"*approvals signed by alice@example.com (key {keys['alice'].fingerprint})*"])
    (line,) = log_lines(pytester.path / "golden")
    assert ssh_keygen_verify(line, pytester.path / "approvers.allowed_signers", pytester.path).returncode == 0
    checked = pytester.runpytest_subprocess(*run)
    checked.assert_outcomes(failed=1)
    checked.stdout.fnmatch_lines(["*golden/tiny.h5 [[]tiny[]] generation 1 needs 2 approval signatures*",
                                  "*counted: the change author (alice@example.com)*",
                                  "*fix: another allowed signer co-signs it: pytest-trt golden approve*"])
    done = _cli("golden", "approve", "golden/tiny.h5", "--reason", "reviewed", "--key", str(keys["bob"].path),
                cwd=pytester.path)  # approvers.allowed_signers is found in the current folder
    assert done.returncode == 0, done.stderr
    pytester.runpytest_subprocess(*run).assert_outcomes(passed=1)
    pytester.makeini("[pytest]\ntrt_approvers = approvers.allowed_signers\ntrt_approvals_required = two\n")
    bad = pytester.runpytest_subprocess(*run)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR and "trt_approvals_required = 'two'" in bad.stderr.str()
