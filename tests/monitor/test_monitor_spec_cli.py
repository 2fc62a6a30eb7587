"""The spec file (its own sha256, clear refusals) and the commands' bad inputs: one line, exit 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_trt.errors import MonitorError
from pytest_trt.monitor import MonitorSpec, Policy, load_spec
from pytest_trt.monitor.spec import output_reference
from tests.monitor.conftest import Digits, cli


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    logits = np.random.default_rng(0).normal(size=(400, 10)).astype(np.float32)
    path = tmp_path / "model.monitor.json"
    path.write_text(MonitorSpec("model", {"logits": output_reference("logits", logits)}, Policy(window=100)).to_json())
    return path


def test_a_spec_round_trips(spec_file: Path) -> None:
    spec = load_spec(spec_file)
    assert spec.policy == Policy(window=100) and spec.source == str(spec_file)
    assert spec.to_json() == spec_file.read_text()
    assert json.loads(spec_file.read_text())["sha256"] == spec.sha256


@pytest.mark.parametrize("edit", [
    ("\"alert_sd\": 2.0", "\"alert_sd\": 4.0"),  # a threshold loosened by hand
    ("\"window\": 100", "\"window\": 10"),
    ("\"mean\": 0.", "\"mean\": 0.1"),  # a reference moved
])
def test_a_spec_edited_by_hand_fails_its_sha256_check(spec_file: Path, edit: tuple[str, str]) -> None:
    text = spec_file.read_text()
    assert edit[0] in text
    spec_file.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(MonitorError, match=r"sha256 check failed") as err:
        load_spec(spec_file)
    assert str(spec_file) in str(err.value) and "pytest-trt monitor spec" in str(err.value)
    assert err.value.path == str(spec_file)


def test_reformatting_a_spec_keeps_it_valid(spec_file: Path) -> None:
    doc = json.loads(spec_file.read_text())
    spec_file.write_text(json.dumps(doc))  # whitespace and key order are not content
    assert load_spec(spec_file).sha256 == doc["sha256"]


@pytest.mark.parametrize(("text", "message"), [
    ("{", "invalid JSON"),
    ("[]", "not a monitor spec"),
    ('{"format": "pytest-trt-monitor", "schema": 9}', "schema 9"),
])
def test_not_a_spec(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(MonitorError, match=message):
        load_spec(path)


def test_policy_values_are_checked() -> None:
    with pytest.raises(MonitorError, match="clear_sd=3.0 is above alert_sd=2.0"):
        Policy(clear_sd=3.0)
    with pytest.raises(MonitorError, match="window=0 must be a positive integer"):
        Policy(window=0)


def test_commands_refuse_bad_input_with_one_line(spec_file: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited.monitor.json"
    edited.write_text(spec_file.read_text().replace("\"confirm\": 3", "\"confirm\": 1"))
    wrong_key, short, bad_shape = tmp_path / "wrong.npz", tmp_path / "short.npz", tmp_path / "shape.npz"
    np.savez(wrong_key, scores=np.zeros((10, 10), np.float32))
    np.savez(short, logits=np.zeros((50, 10), np.float32))
    np.savez(bad_shape, logits=np.zeros((500, 7), np.float32))
    (tmp_path / "junk.npz").write_text("not a zip")
    cases = [
        (("monitor", "spec", tmp_path / "none.h5", "-o", tmp_path / "s.json"), "none.h5: no such golden file"),
        (("monitor", "spec", spec_file, "-o", tmp_path / "s.json"), "model.monitor.json cannot be read"),
        (("monitor", "check", edited, short), "edited.monitor.json: sha256 check failed"),
        (("monitor", "rules", edited), "edited.monitor.json: sha256 check failed"),
        (("monitor", "check", spec_file, tmp_path / "none.npz"), "none.npz: no such samples file"),
        (("monitor", "check", spec_file, tmp_path / "junk.npz"), "junk.npz: not a readable .npz"),
        (("monitor", "check", spec_file, wrong_key), "wrong.npz: no array for monitored output(s) 'logits' "
                                                     "(the file holds 'scores')"),
        (("monitor", "check", spec_file, short), "short.npz: output 'logits' has 50 finite samples, fewer than "
                                                 "one window (100)"),
        (("monitor", "check", spec_file, bad_shape), "shape.npz: output 'logits': got float32 scores of shape"),
        (("monitor", "check", spec_file, short, "--window", "0"), "window=0 must be a positive integer"),
    ]
    for args, message in cases:
        run = cli(*args)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert message in run.stderr and "Traceback" not in run.stderr, (args, run.stderr)
        assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_spec_command_names_the_snapshots_when_one_is_asked_for(digits: Digits, tmp_path: Path) -> None:
    run = cli("monitor", "spec", digits.golden, "-o", tmp_path / "s.json", "--config", "other")
    assert run.returncode == 2
    assert "snapshot 'other' is not in the file (snapshots: digits_mnet)" in run.stderr


def test_spec_command_policy_options(digits: Digits, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    run = cli("monitor", "spec", digits.golden, "-o", out, "--alert-sd", "3", "--window", "500", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["policy"] == {"alert_sd": 3.0, "clear_sd": 1.0, "window": 500, "confirm": 3}
    assert load_spec(out).policy == Policy(alert_sd=3.0, window=500)
