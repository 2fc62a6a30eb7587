"""Small bad inputs give one clear error naming the file or object and the fix, never a traceback or silence.

A config name too long for a bundle's file name, a binary TOML pins file, a profile dimension no engine holds,
a negative or NaN ``calib diff --rtol``, ``log diff`` of files ``log parse`` refuses, an ONNX model with no nodes.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt import BuildConfig, Profile
from pytest_trt.errors import ConfigError, PinsError
from tests.conftest import needs_ort

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "trt_logs" / "log_rtx1.7.1_mobilenet_v2_detailed.txt"
#: a PNG header and bytes that are not UTF-8 (0x89 cannot start a UTF-8 sequence)
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_trt.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def _clean(proc: subprocess.CompletedProcess[str]) -> str:
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text
    return text


# -- config names, TOML, profiles ------------------------------------------------------------------------------


def test_a_config_name_longer_than_a_file_name_allows_is_refused(models):
    with pytest.raises(ConfigError, match=r"is 300 characters long; give at most 100 \(file names hold it"):
        BuildConfig(name="n" * 300, onnx=models["conv_bn_relu"])
    with pytest.raises(ConfigError, match=r"version 'vvvvvvvv.*is 33 characters long; give at most 32"):
        BuildConfig(name="ok", version="v" * 33, onnx=models["conv_bn_relu"])


@needs_ort
def test_the_longest_config_name_writes_its_bundle(pytester, models):
    name, version = "n" * 100, "1." + "0" * 30
    pytester.makepyfile(test_long=f"""
import pytest
from pytest_trt import BuildConfig

CFG = BuildConfig(name={name!r}, version={version!r}, onnx={str(models["conv_bn_relu"])!r})

@pytest.mark.trt(CFG)
def test_engine(trt_engine):
    assert trt_engine.result.engine_sha256
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-engine-build", "--trt-backend",
                                           "onnxruntime", "--trt-bundle-dir=b")
    result.assert_outcomes(passed=1)
    [bundle] = (pytester.path / "b").glob("*.tar.gz")
    assert bundle.name.startswith(f"{name}-v{version}-")
    assert "not written" not in result.stdout.str()


def test_a_binary_toml_config_file_is_a_config_error(tmp_path):
    path = tmp_path / "pins.toml"
    path.write_bytes(BINARY)
    with pytest.raises(ConfigError) as exc:
        BuildConfig.from_toml(path, "tiny")
    assert exc.value.message == (f"config file {str(path)!r} is not TOML: not UTF-8 text (invalid start byte at byte "
                                 "0); give the pins file itself")


def test_a_binary_pins_file_is_a_pins_error(tmp_path):
    from pytest_trt.audit.pins import Pins

    path = tmp_path / "pins.toml"
    path.write_bytes(BINARY)
    with pytest.raises(PinsError, match=r"pins.toml: not TOML: not UTF-8 text \(invalid start byte at byte 0\)"):
        Pins.load(path)


def test_a_binary_pins_file_stops_the_session_without_internal_error(pytester):
    (pytester.path / "pins.toml").write_bytes(BINARY)
    pytester.makepyfile(test_nothing="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-pins=pins.toml")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "UnicodeDecodeError" not in text, text
    assert "pins.toml: not TOML: not UTF-8 text" in text, text
    assert result.ret != 0


@pytest.mark.parametrize("dim", [2**31, 2**63])
def test_a_profile_dimension_no_engine_holds_is_refused(dim):
    with pytest.raises(ConfigError, match=rf"Profile input 'x': dimension {dim} in \({dim}, 4\) is larger than "
                                          r"2147483647"):
        Profile(x=((1, 4), (8, 4), (dim, 4)))
    assert Profile(x=((1, 4), (8, 4), (2**31 - 1, 4))).inputs[0].max == (2**31 - 1, 4)


# -- calib diff --rtol -----------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    path = tmp_path / "a.cache"
    path.write_text("TRT-8601-MinMaxCalibration\nx: 3c95f941\nlogits: 3dd77398\n")
    return path


@pytest.mark.parametrize("rtol", ["-1", "nan", "inf", "-0.5", "x"])
def test_calib_diff_refuses_a_tolerance_that_is_not_a_non_negative_number(cache, rtol):
    proc = cli("calib", "diff", cache, cache, f"--rtol={rtol}")
    assert proc.returncode == 2
    assert f"argument --rtol: {rtol!r} is not a tolerance: give a number of 0 or more" in _clean(proc)


@pytest.mark.parametrize("rtol", ["0", "0.01"])
def test_calib_diff_of_the_same_cache_is_identical(cache, rtol):
    proc = cli("calib", "diff", cache, cache, "--rtol", rtol)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "identical", _clean(proc)


# -- log diff refuses what log parse refuses; empty ONNX models ------------------------------------------------


def _bad_logs(folder: Path) -> dict[str, Path]:
    files = {"empty": b"", "binary": BINARY + b"\0" * 8, "gzip": gzip.compress(LOG.read_bytes()[:4000]),
             "prose": b"hello\nthis is not a TensorRT log\n"}
    out = {}
    for name, data in files.items():
        out[name] = folder / f"{name}.log"
        out[name].write_bytes(data)
    return out


@pytest.mark.parametrize("kind", ["empty", "binary", "gzip", "prose"])
def test_log_diff_refuses_what_log_parse_refuses(tmp_path, kind):
    bad = _bad_logs(tmp_path)[kind]
    parse = cli("log", "parse", bad)
    assert parse.returncode == 3
    message = _clean(parse).strip()
    for pair in ((bad, bad), (LOG, bad), (bad, LOG)):
        proc = cli("log", "diff", *pair)
        assert proc.returncode == 3, proc.stdout
        assert _clean(proc).strip() == message


def test_log_diff_of_a_real_log_still_works():
    proc = cli("log", "diff", LOG, LOG)
    assert proc.returncode == 0 and "build records match" in _clean(proc)


@needs_ort
@pytest.mark.parametrize("content", ["no nodes", "zero bytes"])
@pytest.mark.parametrize("command", ["parse", "diff"])
def test_an_onnx_model_with_no_nodes_is_refused(tmp_path, content, command):
    import onnx
    from onnx import TensorProto, helper

    model = tmp_path / "empty.onnx"
    if content == "zero bytes":
        model.write_bytes(b"")
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
        onnx.save(helper.make_model(helper.make_graph([], "g", [x], [x])), model)
    logs = [LOG] if command == "parse" else [LOG, LOG]
    proc = cli("log", command, *logs, "--onnx", model)
    assert proc.returncode == 3
    assert _clean(proc).strip() == (f"pytest-trt: {model}: not a readable ONNX model (its graph holds no nodes); "
                                    "give the .onnx file the engine was built from")
