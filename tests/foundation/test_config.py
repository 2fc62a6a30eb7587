"""BuildConfig / Profile / Calibration: validation, canonical JSON, hash stability, TOML pins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_trt import BuildConfig, Calibration, ConfigError, OrtOptions, Profile


def test_profile_accepts_names_and_fixed_shapes():
    p = Profile({"input.1": (1, 3, 8, 8)}, mask=((1, 4), (2, 4), (4, 4)))
    assert p.names() == ("input.1", "mask")
    assert p["input.1"].min == p["input.1"].max == (1, 3, 8, 8)
    assert p.to_json()["mask"] == {"min": [1, 4], "opt": [2, 4], "max": [4, 4]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (((4, 3), (2, 3), (8, 3)), "min > opt at axis 0 (4 > 2)"),
        (((1, 3), (8, 3), (4, 3)), "opt > max at axis 0 (8 > 4)"),
        (((1, 3), (2, 3, 1), (4, 3)), "rank mismatch: min has rank 2, opt 3, max 2"),
        (((1, -3), (1, 3), (1, 3)), "non-negative int"),
        ("1x3", "expected a shape"),
    ],
)
def test_profile_rejects_bad_shapes(spec, message):
    with pytest.raises(ConfigError, match="Profile input 'x'") as info:
        Profile(x=spec)
    assert message in str(info.value)
    assert info.value.field == "profiles"


def test_missing_onnx_file_names_the_path(tmp_path):
    with pytest.raises(ConfigError) as info:
        BuildConfig(name="m", onnx=tmp_path / "nope.onnx")
    assert info.value.field == "onnx"
    assert "nope.onnx" in str(info.value) and "does not exist" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "field", "text"),
    [
        ({"precision": "fp64"}, "precision", "choose one of fp32, tf32, fp16"),
        ({"memory_pool_limits": {"workspace": -1}}, "memory_pool_limits", "negative"),
        ({"memory_pool_limits": {"workspace": "-1GiB"}}, "memory_pool_limits", "negative"),
        ({"memory_pool_limits": {"workspace": "lots"}}, "memory_pool_limits", "'512MiB', '1GiB'"),
        ({"memory_pool_limits": {"vram": "1GiB"}}, "memory_pool_limits", "unknown pool 'vram'"),
        ({"builder_optimization_level": 7}, "builder_optimization_level", "0 to 5"),
        ({"flags": [1 << 3]}, "flags", "not integers"),
        ({"flags": ["FP16"]}, "flags", "precision='fp16'"),
        ({"compute_capabilities": ["ampere"]}, "compute_capabilities", "'SM89'"),
        ({"name": "bad name"}, "name", "letters, digits"),
        ({"calibration": Calibration()}, "calibration", "precision='int8'"),
        ({"profiles": [Profile(a=(1,)), Profile(b=(1,))]}, "profiles", "same inputs"),
    ],
)
def test_invalid_fields_raise_value_error_naming_the_field(models, kwargs, field, text):
    base = {"name": "m", "onnx": models["conv_bn_relu"]}
    base.update(kwargs)
    with pytest.raises(ValueError) as info:
        BuildConfig(**base)
    assert isinstance(info.value, ConfigError) and info.value.field == field
    assert text in str(info.value)


def test_calibration_and_ort_validate_their_fields():
    with pytest.raises(ConfigError, match="algorithm 'kl'"):
        Calibration(algorithm="kl")
    with pytest.raises(ConfigError, match="graph_optimization_level 'max'"):
        OrtOptions(graph_optimization_level="max")


def test_sizes_and_flags_are_normalised(models):
    cfg = BuildConfig(
        name="m",
        onnx=models["conv_bn_relu"],
        memory_pool_limits={"workspace": "1GiB"},
        flags=["STRICT_NANS", "REFIT", "STRICT_NANS"],
        compute_capabilities=["sm89", "SM120"],
    )
    assert cfg.memory_pool_limits == {"workspace": 1 << 30}
    assert cfg.flags == ("REFIT", "STRICT_NANS")
    assert cfg.compute_capabilities == ("SM120", "SM89")
    data = json.loads(cfg.canonical_json())
    assert data["flags"] == ["REFIT", "STRICT_NANS"]
    assert list(data) == sorted(data)


def _hash_in_subprocess(onnx: Path) -> str:
    code = (
        "from pytest_trt import BuildConfig, Profile;"
        f"print(BuildConfig(name='m', version='2', onnx={str(onnx)!r}, profiles=[Profile(input=((1,3,16,16),(2,3,16,16),(4,3,16,16)))],"
        " memory_pool_limits={'workspace': '1GiB'}).config_hash)"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_hash_is_stable_across_processes(models):
    onnx = models["conv_bn_relu"]
    local = BuildConfig(
        name="m",
        version="2",
        onnx=onnx,
        profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))],
        memory_pool_limits={"workspace": 1 << 30},
    ).config_hash
    assert _hash_in_subprocess(onnx) == _hash_in_subprocess(onnx) == local


CHANGES = {
    "name": "other",
    "version": "3",
    "precision": "tf32",
    "profiles": [Profile(input=((1, 3, 16, 16), (4, 3, 16, 16), (4, 3, 16, 16)))],
    "builder_optimization_level": 2,
    "memory_pool_limits": {"workspace": "2GiB"},
    "flags": ["STRICT_NANS"],
    "timing_cache": "cache.bin",
    "compute_capabilities": ["SM89"],
    "hardware_compatibility_level": "AMPERE_PLUS",
    "ort": OrtOptions(graph_optimization_level="basic"),
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_changing_any_field_changes_the_hash(models, field):
    base = BuildConfig(
        name="m",
        version="2",
        onnx=models["conv_bn_relu"],
        profiles=[Profile(input=((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16)))],
    )
    assert base.replace(**{field: CHANGES[field]}).config_hash != base.config_hash


def test_one_byte_of_onnx_changes_the_hash_but_its_path_does_not(models, tmp_path):
    data = models["conv_bn_relu"].read_bytes()
    a, b, c = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "sub" / "c.onnx"
    a.write_bytes(data)
    b.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    c.parent.mkdir()
    c.write_bytes(data)
    ha, hb, hc = (BuildConfig(name="m", onnx=p).config_hash for p in (a, b, c))
    assert ha != hb
    assert ha == hc  # the model is pinned by its bytes, so moving a repository keeps its pins


def test_from_toml_resolves_paths_against_the_file(models, tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "m.onnx").write_bytes(models["conv_bn_relu"].read_bytes())
    pins = tmp_path / "pins.toml"
    pins.write_text(
        '[configs.prod]\nversion = "1.2.3"\nonnx = "models/m.onnx"\nprecision = "tf32"\n'
        'memory_pool_limits = { workspace = "512MiB" }\nflags = ["STRICT_NANS"]\n'
        "[[configs.prod.profiles]]\ninput = { min = [1,3,16,16], opt = [2,3,16,16], max = [4,3,16,16] }\n",
        encoding="utf-8",
    )
    cfg = BuildConfig.from_toml(pins, "prod")
    assert cfg.name == "prod" and cfg.version == "1.2.3"
    assert cfg.onnx == tmp_path / "models" / "m.onnx"
    assert cfg.memory_pool_limits == {"workspace": 512 << 20}
    assert cfg.profiles[0]["input"].opt == (2, 3, 16, 16)
    with pytest.raises(ConfigError, match="'staging' is not in .*it defines: prod"):
        BuildConfig.from_toml(pins, "staging")


def test_from_toml_reports_bad_files(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[configs.x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        BuildConfig.from_toml(bad, "x")
    with pytest.raises(ConfigError, match="does not exist"):
        BuildConfig.from_toml(tmp_path / "missing.toml", "x")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('[x]\nonnx = "m.onnx"\nfp16 = true\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown BuildConfig field"):
        BuildConfig.from_toml(unknown, "x")


def test_config_is_frozen(models):
    cfg = BuildConfig(name="m", onnx=models["conv_bn_relu"])
    with pytest.raises(AttributeError):
        cfg.name = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Profile(a=(1,)).inputs = ()  # type: ignore[misc]
