"""The buildlog package imports its submodules on first use: any of them may be the first one imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pytest_trt.buildlog as buildlog

FIRST = ("record", "calibration_assertions", "assertions", "parser", "record_diff", "layerjson", "listings", "parts",
         "readers", "registry", "matching", "chunks")


@pytest.mark.parametrize("first", FIRST)
def test_each_submodule_imports_first_in_a_fresh_process(first: str) -> None:
    code = (f"import pytest_trt.buildlog.{first}\n"
            "import pytest_trt.buildlog as b, pytest_trt.buildlog.assertions as a\n"
            "assert a.assert_calibration.__module__ == 'pytest_trt.buildlog.calibration_assertions'\n"
            "assert all(getattr(b, n) is not None for n in b.__all__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_reading_a_record_loads_no_parser() -> None:
    code = ("import sys, pytest_trt.buildlog.record\n"
            "print(sorted(m for m in sys.modules if m.startswith('pytest_trt.buildlog')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("['pytest_trt.buildlog', 'pytest_trt.buildlog.parts', 'pytest_trt.buildlog.record', "
                                  "'pytest_trt.buildlog.schema']")


def test_public_names_resolve_and_unknown_ones_raise() -> None:
    assert set(buildlog.__all__) <= set(dir(buildlog))
    assert buildlog.BuildRecord.__module__ == "pytest_trt.buildlog.record"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        buildlog.nope  # noqa: B018
