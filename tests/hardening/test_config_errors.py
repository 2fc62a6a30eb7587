"""Config errors name the TOML file and config, and a bad config at import is that module's error only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_trt import BuildConfig
from pytest_trt.errors import ConfigError

TOML_CASES = [
    ('profiles = "abc"', "profiles must be a table or a list of tables"),
    ("precision = \"fp64\"", "BuildConfig.precision 'fp64'"),
    ("[configs.m.calibration]\nalgoritm = \"entropy2\"", "unknown key(s) algoritm under calibration; known: "),
    ("[configs.m.ort]\nintra_threads = 2", "unknown key(s) intra_threads under ort; known: "),
    ("[configs.m.ort]\nexecution_providers = 5", "ort: "),
    ("profiles = [{input = [[1, 3, 8, 8], [1, 3, 8, 8], [1, 3, 4, 8]]}]", "opt > max at axis 2 (8 > 4)"),
    ("profiles = [{input = [[1, 3, 8, 8], [1, 3, 8, 8]]}]", "Profile input 'input': expected (min, opt, max) shapes"),
    ("precison = \"fp32\"", "unknown BuildConfig field(s) precison"),
    ("flags = 3", "[configs.m]: "),
]


@pytest.mark.parametrize(("extra", "detail"), TOML_CASES)
def test_toml_errors_name_the_file_and_the_config(tmp_path: Path, extra: str, detail: str) -> None:
    toml = tmp_path / "pins.toml"
    (tmp_path / "m.onnx").write_bytes(b"only its existence is checked here")
    base, _, table = extra.partition("\n")
    lines = ["[configs.m]", 'onnx = "m.onnx"']
    if table:
        lines += [base, table]
    else:
        lines.insert(2, base)
    toml.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        BuildConfig.from_toml(toml, "m")
    msg = str(info.value)
    assert msg.startswith(f"{toml} [configs.m]: "), msg
    assert detail in msg, msg
    assert info.value.__cause__ is None and info.value.__suppress_context__


BAD_MODULE = """
from pytest_trt import BuildConfig, Profile
CFG = BuildConfig(name="m", onnx="m.onnx", precision={precision!r})

def test_never_runs():
    pass
"""


def test_bad_config_at_import_is_one_module_error_and_the_rest_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad=BAD_MODULE.format(precision="fp64"),
        test_good="def test_fine():\n    pass\n",
        test_toml=textwrap.dedent(
            """
            from pytest_trt import BuildConfig
            CFG = BuildConfig.from_toml("pins.toml", "m")

            def test_never_runs():
                pass
            """
        ),
    )
    pytester.path.joinpath("m.onnx").write_bytes(b"x")
    pytester.path.joinpath("pins.toml").write_text('[configs.m]\nonnx = "m.onnx"\nprofiles = "abc"\n', encoding="utf-8")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_bad.py: importing this test module raised ConfigError: BuildConfig.precision 'fp64'*",
            "*test_toml.py: importing this test module raised ConfigError: pins.toml [[]configs.m[]]: profiles must be*",
            "*PASSED test_good.py::test_fine*",
        ]
    )
    assert "Interrupted" not in result.stdout.str()
    assert "pytest_trt/config.py" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_other_import_errors_are_left_to_pytest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_broken="raise RuntimeError('not ours')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*RuntimeError: not ours*", "*Interrupted: 1 error during collection*"])
