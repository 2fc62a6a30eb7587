"""Bad golden files and folders: one clear error naming the file or folder and the fix, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
from golden_engines import OrtEngine, reseal

from pytest_trt.config import BuildConfig
from pytest_trt.errors import FolderUnusable, GoldenCorrupt, GoldenError
from pytest_trt.golden.dataset import GoldenDataset
from pytest_trt.golden.workflow import GoldenCheck, UpdateResult

MakeConfig = Callable[..., BuildConfig]
MakeGolden = Callable[..., GoldenCheck]


def _approved(golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset) -> OrtEngine:
    engine = OrtEngine(make_config())
    assert isinstance(golden(update=True, approve="first").check(engine, dataset=dataset), UpdateResult)
    return engine


def _edit_attr(path: Path, attr: str, value: object) -> None:
    with h5py.File(path, "r+") as f:
        f["snapshots/tiny"].attrs[attr] = json.dumps(value)
    reseal(path)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import sys; from pytest_trt.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, timeout=120)


BAD_ATTRS = [
    ("provenance", "no_backend", "snapshot 'tiny': provenance has no 'backend'"),
    ("provenance", [1, 2], "snapshot 'tiny': attribute provenance is a JSON list, not an object"),
    ("provenance", "backend_int", "snapshot 'tiny': provenance 'backend' is 7, not a string"),
    ("baselines", ["logits"], "snapshot 'tiny': attribute baselines is a JSON list, not an object"),
    ("baselines", "text", "snapshot 'tiny': attribute baselines is a JSON str, not an object"),
]


@pytest.mark.parametrize(("attr", "value", "detail"), BAD_ATTRS)
def test_wrong_typed_attributes_are_golden_corrupt_in_checks_and_show(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset, golden_dir: Path,
    attr: str, value: object, detail: str,
) -> None:
    engine = _approved(golden, make_config, dataset)
    path = golden_dir / "tiny.h5"
    if value in ("no_backend", "backend_int"):
        with h5py.File(path, "r") as f:
            prov = json.loads(f["snapshots/tiny"].attrs["provenance"])
        if value == "no_backend":
            del prov["backend"]
        else:
            prov["backend"] = 7
        value = prov
    _edit_attr(path, attr, value)
    with pytest.raises(GoldenCorrupt) as info:
        golden().check(engine)
    msg = str(info.value)
    assert msg.startswith(f"golden file {path} cannot be read (ValueError: {detail})")
    assert "git checkout --" in msg
    out = _cli("golden", "show", str(path))
    assert out.returncode == 3
    assert out.stderr.startswith(f"pytest-trt: {path}: golden file {path} cannot be read (ValueError: {detail})")
    assert "Traceback" not in out.stderr


def test_shape_mismatch_names_the_golden_file(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset
) -> None:
    config = make_config()
    outputs = OrtEngine(config).run({"x": dataset.inputs["x"]})
    golden(update=True, approve="imported", config_provider=lambda: config).check(outputs, dataset=dataset)
    narrow = {**outputs, "logits": outputs["logits"][:, :3]}
    with pytest.raises(GoldenError) as info:
        golden(config_provider=lambda: config).check(narrow)
    assert str(info.value).startswith(
        f"golden tiny.h5 [tiny]: output 'logits': the engine gives samples of shape (3,), the golden holds "
        f"({outputs['logits'].shape[1]},)"
    )


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the comparison streams see the NaN first
def test_approved_update_refuses_nan_outputs_and_writes_nothing(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset, golden_dir: Path
) -> None:
    config = make_config()
    outputs = OrtEngine(config).run({"x": dataset.inputs["x"]})
    logits = outputs["logits"].copy()
    logits[[3, 50], 0] = np.nan
    logits[51, 1] = np.inf
    with pytest.raises(GoldenError) as info:
        golden(update=True, approve="x", config_provider=lambda: config).check({**outputs, "logits": logits},
                                                                               dataset=dataset)
    assert str(info.value).startswith(
        "golden tiny.h5 [tiny]: output 'logits' has 3 NaN/Inf value(s) in 3 sample(s) (3, 50, 51); an approved "
        "golden never stores them and the update was not written"
    )
    assert not (golden_dir / "tiny.h5").exists()


def test_golden_dir_that_is_a_file(golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset,
                                   golden_dir: Path) -> None:
    golden_dir.write_text("oops")
    expected = f"golden folder {golden_dir} is a file, not a folder: remove or rename it, or point --trt-golden-dir"
    with pytest.raises(FolderUnusable, match="^" + expected.replace(".", r"\.")):
        golden().check(OrtEngine(make_config()))
    with pytest.raises(FolderUnusable, match="^" + expected.replace(".", r"\.")):
        golden(update=True, approve="x").check(OrtEngine(make_config()), dataset=dataset)
    assert golden_dir.read_text() == "oops"


READ_ONLY_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, {golden_tests!r})
import numpy as np
from golden_engines import OrtEngine, reseal
from pytest_trt.config import BuildConfig, Profile
from pytest_trt.errors import TrtError
from pytest_trt.golden.workflow import GoldenCheck, GoldenSettings
cfg = BuildConfig(name="tiny", onnx=Path({onnx!r}), profiles=(Profile(x=((1, 8), (16, 8), (16, 8))),))
for update in (False, True):
    settings = GoldenSettings(golden_dir=Path({golden!r}), update=update, approve="x" if update else None,
                              rootdir=Path({golden!r}).parent)
    try:
        GoldenCheck(settings, nodeid="t").check(OrtEngine(cfg))
        print("update" if update else "check", "OK")
    except TrtError as exc:
        print("update" if update else "check", type(exc).__name__ + ":", exc.message)
"""


def test_read_only_golden_dir_serves_checks_and_refuses_updates_clearly(
    golden_dir: Path, dataset: GoldenDataset, make_config: MakeConfig
) -> None:
    import shutil

    from tests.hardening import unprivileged

    folder = unprivileged.world_dir()
    try:
        config = make_config()
        onnx = folder / "tiny.onnx"
        shutil.copyfile(config.onnx, onnx)
        settings_dir = folder / "golden"
        from pytest_trt.golden.workflow import GoldenSettings

        cfg = config.replace(onnx=onnx)
        check = GoldenCheck(GoldenSettings(golden_dir=settings_dir, update=True, approve="first", rootdir=folder))
        check.check(OrtEngine(cfg), dataset=dataset)
        (settings_dir / "tiny.h5.lock").unlink(missing_ok=True)
        for p in [settings_dir, *settings_dir.iterdir()]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        before = {p.name: p.read_bytes() for p in settings_dir.iterdir()}
        code = READ_ONLY_SCRIPT.format(golden_tests=str(Path(__file__).parent), onnx=str(onnx), golden=str(settings_dir))
        out = unprivileged.run(code, cwd=folder)
        lines = out.stdout.splitlines()
        assert lines[0] == "check OK", out.stdout + out.stderr
        assert lines[1].startswith(f"update FolderUnusable: golden folder {settings_dir} cannot be written "
                                   "(Permission denied): make it writable, or point --trt-golden-dir"), lines
        assert {p.name: p.read_bytes() for p in settings_dir.iterdir()} == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_update_removes_temp_copies_of_dead_writers_only(
    golden: MakeGolden, make_config: MakeConfig, dataset: GoldenDataset, golden_dir: Path
) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    golden_dir.mkdir()
    stale = golden_dir / f".other.h5.tmp-{int(dead.stdout)}"
    live = golden_dir / ".other.h5.tmp-1"  # pid 1 runs
    for p in (stale, live):
        p.write_bytes(b"\0" * 4096)
    _approved(golden, make_config, dataset)
    assert not stale.exists() and live.exists()
