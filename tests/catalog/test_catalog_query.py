"""Catalog queries and the ``pytest-trt catalog`` commands on an archive of real bundles."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_trt.cli import main
from tests.catalog.conftest import set_created, verdict
from tests.conftest import RTX_VERSION


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory, rtx_result: Any, ort_result: Any, write: Any) -> dict[str, Any]:
    """Five bundles over time: three mnv2 versions, one cbr (ONNX Runtime), one 'TensorRT 8.6 on A100'.

    The last one carries the metadata of a TensorRT 8.6 A100 build around a real TensorRT-RTX engine (no such
    build can run here): what is under test is the filter, not TensorRT.
    """
    folder = tmp_path_factory.mktemp("archive") / "trt-bundles"
    paths = {
        "v1.0": write(rtx_result, folder, version="1.0", golden={"t.py::acc": verdict(rtx_result, "pass")}),
        "v1.1": write(rtx_result, folder, version="1.1", calibration=True, golden={
            "t.py::acc": verdict(rtx_result, "fail", metrics={"l2_delta": 0.18}, golden="g/mnv2.h5",
                                 generation=1)}),
        "v1.2": write(rtx_result, folder, version="1.2", golden={
            "t.py::acc": verdict(rtx_result, "updated", golden="g/mnv2.h5", generation=2, approver="Ada",
                                 reason="upgrade reviewed")}),
        "cbr": write(ort_result, folder),
    }
    a100 = dataclasses.replace(rtx_result, backend="tensorrt", backend_version="8.6.1.6",
                               versions={"backend": "8.6.1.6", "tensorrt": "8.6.1.6"},
                               device={"kind": "gpu", "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0"},
                               config={**rtx_result.config, "name": "resnet", "version": "3.0"})
    paths["a100"] = write(a100, folder, calibration=True, golden={"t.py::acc": verdict(a100, "pass")})
    for key, when in zip(paths, ("2026-02-01", "2026-03-05", "2026-03-10", "2026-03-15", "2026-03-20"), strict=True):
        set_created(paths[key], when + "T12:00:00Z")
    db = folder / "catalog.sqlite"
    assert main(["catalog", "add", str(folder), "--db", str(db)]) == 0
    return {"db": db, "paths": paths, "folder": folder}


def _query(archive: dict[str, Any], capsys: Any, *args: str) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["catalog", "query", "--db", str(archive["db"]), "--json", *args])
    doc = json.loads(capsys.readouterr().out)
    return code, sorted(Path(b["path"]).name for b in doc["bundles"])


def _names(archive: dict[str, Any], *keys: str) -> list[str]:
    return sorted(archive["paths"][k].name for k in keys)


@pytest.mark.parametrize(("args", "expected"), [
    ((), ("v1.0", "v1.1", "v1.2", "cbr", "a100")),
    (("--config", "mnv2"), ("v1.0", "v1.1", "v1.2")),
    (("--config", "mn*"), ("v1.0", "v1.1", "v1.2")),
    (("--backend-version", "8.6.*"), ("a100",)),
    (("--backend-version", "8.6"), ("a100",)),
    (("--backend-version", "8.5.*"), ()),
    (("--backend-version", ".".join(RTX_VERSION.split(".")[:2]) + ".*"), ("v1.0", "v1.1", "v1.2")),
    (("--device", "a100"), ("a100",)),
    (("--device", "cpu"), ("v1.0", "v1.1", "v1.2", "cbr")),
    (("--calibration", "min-max"), ("v1.1", "a100")),
    (("--backend-version", "8.6.*", "--device", "A100", "--calibration", "minmax"), ("a100",)),
    (("--verdict", "regression"), ("v1.1",)),
    (("--verdict", "updated"), ("v1.2",)),
    (("--since", "2026-03-06"), ("v1.2", "cbr", "a100")),
    (("--backend", "onnxruntime"), ("cbr",)),
])
def test_filters(archive, capsys, args, expected):
    code, names = _query(archive, capsys, *args)
    assert names == _names(archive, *expected)
    assert code == (0 if expected else 1)


def test_engine_sha256_names_the_bundle(archive, capsys, ort_result):
    engine = hashlib.sha256(ort_result.engine).hexdigest()
    assert _query(archive, capsys, "--engine-sha256", engine[:12])[1] == _names(archive, "cbr")
    capsys.readouterr()
    assert main(["catalog", "show", engine, "--db", str(archive["db"])]) == 0
    out = capsys.readouterr().out
    assert f"bundle: {archive['paths']['cbr'].resolve()}" in out
    assert f"engine sha256: {engine} (in bundle)" in out


def test_table_names_every_bundle_file(archive, capsys):
    capsys.readouterr()
    assert main(["catalog", "query", "--config", "mnv2", "--db", str(archive["db"])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["created", "config", "backend", "device", "calibration", "verdicts", "engine",
                                "sha256", "bundle"]
    assert [ln.split()[-1] for ln in lines[1:4]] == [str(archive["paths"][k].resolve()) for k in
                                                     ("v1.0", "v1.1", "v1.2")]
    assert "fail" in lines[2] and "minmax" in lines[2] and "updated (1 approval)" in lines[3]
    assert lines[-1] == "3 bundles"


def test_history(archive, capsys):
    capsys.readouterr()
    assert main(["catalog", "history", "mnv2", "--db", str(archive["db"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("history of mnv2: 3 bundles\n2026-02-01T12:00:00Z  v1.0  tensorrt-rtx")
    assert "  verdict: fail  t.py::acc  [l2_delta 0.18]" in out
    assert "  approval: g/mnv2.h5 generation 2 by Ada: upgrade reviewed" in out
    assert out.count("  bundle: ") == 3
    assert main(["catalog", "history", "nope", "--db", str(archive["db"])]) == 1
    capsys.readouterr()
    assert main(["catalog", "history", "mnv2", "--since", "2026-03-06", "--db", str(archive["db"])]) == 0
    assert capsys.readouterr().out.startswith("history of mnv2: 1 bundle\n2026-03-10T12:00:00Z  v1.2")


def test_show_unknown_sha_and_missing_db(archive, capsys, tmp_path):
    assert main(["catalog", "show", "ffff0000", "--db", str(archive["db"])]) == 1
    assert main(["catalog", "query", "--db", str(tmp_path / "none.sqlite")]) == 3
    assert "no catalog here" in capsys.readouterr().err
    assert main(["catalog", "query", "--since", "last tuesday", "--db", str(archive["db"])]) == 2


def test_exit_codes_in_a_subprocess(archive, tmp_path):
    from tests.audit.conftest import read_members, rebuild

    members = read_members(archive["paths"]["v1.0"])
    members["golden.json"] = members["golden.json"].replace(b'"pass"', b'"fail"')
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(rebuild(members))
    cmd = [sys.executable, "-m", "pytest_trt.cli", "catalog", "add", str(bad), "--db", str(tmp_path / "c.sqlite")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert f"REFUSED {bad}: {bad}: member golden.json: sha256 mismatch" in proc.stdout
    assert "Traceback" not in proc.stderr
    proc = subprocess.run(cmd[:5] + [str(tmp_path / "missing.tar.gz")] + cmd[6:], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3 and "no such file" in proc.stdout
    proc = subprocess.run(cmd[:4] + ["prune", "--db", str(archive["db"])], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "prune needs --keep-last N, --older-than DURATION or both" in proc.stderr
