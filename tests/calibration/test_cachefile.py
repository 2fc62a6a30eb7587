"""TensorRT calibration caches: byte-identical round trip, writing, strict reading, comparison."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from pytest_trt.buildlog.calibcache import (
    CalibrationCacheError,
    compare_caches,
    format_calibration_cache,
    parse_calibration_cache,
    read_calibration_cache,
    rewrite,
    version_tag,
    write_calibration_cache,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
CACHES = sorted(DATA.glob("calib_*.cache"))


@pytest.mark.parametrize("path", CACHES, ids=lambda p: p.name)
def test_real_caches_round_trip_byte_identical(path: Path, tmp_path: Path) -> None:
    cache = read_calibration_cache(path, strict=True)
    assert cache.unparsed_lines == 0
    out = tmp_path / "again.cache"
    write_calibration_cache(out, rewrite(cache))
    assert out.read_bytes() == path.read_bytes()


def test_written_values_are_big_endian_float32_hex() -> None:
    # 2**-7 is 0x3c000000 and 1.0 is 0x3f800000 in IEEE-754 single precision
    text = format_calibration_cache("minmax", {"b": 1.0, "a:x": 2.0**-7}, tag="8601")
    assert text == "TRT-8601-MinMaxCalibration\na:x: 3c000000\nb: 3f800000\n"
    parsed = parse_calibration_cache(text, strict=True)
    assert parsed.trt_version == "8.6.1" and parsed.calibrator == "MinMaxCalibration"
    assert parsed.scales == {"a:x": 2.0**-7, "b": 1.0}


def test_version_tags_follow_the_real_caches() -> None:
    assert version_tag("8.6.1") == "8601" and version_tag("7.1.3") == "7103"
    assert version_tag("10.14.1") == "101401" and version_tag("10.6.0") == "100600"


@pytest.mark.parametrize(("text", "line", "what"), [
    ("TRT-8601-EntropyCalibration2\ninput: 3c010a14\nconv1 3c010a14\n", 3, "'conv1 3c010a14'"),
    ("TRT-8601-EntropyCalibration2\ninput: 3c010a14\n\nrelu: zz010a14\n", 4, "'relu: zz010a14'"),
    ("not a cache\ninput: 3c010a14\n", 1, "calibration cache header 'not a cache'"),
])
def test_malformed_caches_fail_with_the_line_number(text: str, line: int, what: str) -> None:
    with pytest.raises(CalibrationCacheError, match=rf"calib.cache:{line}: {re.escape(what)}") as ei:
        parse_calibration_cache(text, strict=True, path="calib.cache")
    assert ei.value.line == line
    assert parse_calibration_cache(text).unparsed_lines == 1  # lenient reading counts, never fails


def _hex_scales(path: Path) -> dict[str, float]:
    # an independent reader: one regex, struct
    out = {}
    for m in re.finditer(r"^(.*): ([0-9a-f]{8})$", path.read_text(), re.M):
        out[m.group(1)] = struct.unpack(">f", bytes.fromhex(m.group(2)))[0]
    return out


def test_compare_real_caches_across_versions() -> None:
    a, b = DATA / "calib_trt8.2.4_entropy2_cookbook_plugin.cache", DATA / "calib_trt10.6.0_entropy2_cookbook_plugin.cache"
    cmp = compare_caches(a, b)
    assert cmp.version_changed and not cmp.algorithm_changed
    assert cmp.added == ("(Unnamed Layer* 0) [PluginV2DynamicExt]_output", "outputT0")
    assert cmp.missing == ("(Unnamed Layer* 0) [PluginV2DynamicExt]_output_0", "(Unnamed Layer* 1) [Identity]_output")
    sa, sb = _hex_scales(a)["inputT0"], _hex_scales(b)["inputT0"]
    assert cmp.ratios == {"inputT0": pytest.approx(sb / sa)}
    text = cmp.describe()
    assert "TRT-8204-EntropyCalibration2 -> TRT-100600-EntropyCalibration2 (version changed)" in text
    assert "2 tensor(s) added" in text and f"inputT0: scale x{sb / sa:.4g}" in text
    assert compare_caches(a, a).identical() and not cmp.identical()


def test_compare_reports_an_algorithm_change() -> None:
    a = parse_calibration_cache(format_calibration_cache("entropy2", {"x": 1.0, "y": 0.5}, tag="8601"))
    b = parse_calibration_cache(format_calibration_cache("minmax", {"x": 4.0, "y": 0.5}, tag="8601"))
    cmp = compare_caches(a, b)
    assert cmp.algorithm_changed and not cmp.version_changed
    assert cmp.changed() == {"x": 4.0} and cmp.changed(rtol=5.0) == {}
    assert "algorithm changed" in cmp.describe()


def test_comparing_a_malformed_cache_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cache"
    bad.write_text("TRT-8601-EntropyCalibration2\nx: 3f800000\ny\n")
    with pytest.raises(CalibrationCacheError, match=r"bad.cache:3: 'y'"):
        compare_caches(DATA / CACHES[0].name, bad)


def test_parsing_never_crashes_and_generated_caches_round_trip() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=150, deadline=None)
    @given(st.text(max_size=300))
    def lenient_or_located(text: str) -> None:
        parse_calibration_cache(text)  # lenient: never raises
        try:
            parse_calibration_cache(text, strict=True)
        except CalibrationCacheError as exc:
            assert exc.line >= 1

    names = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=30).filter(
        lambda s: s.strip() == s and not s.endswith(":"))
    scales = st.floats(min_value=0, max_value=1e6, allow_nan=False, width=32)

    @settings(max_examples=150, deadline=None)
    @given(st.dictionaries(names, scales, max_size=20), st.sampled_from(["entropy2", "minmax", "legacy"]))
    def round_trip(values: dict[str, float], algorithm: str) -> None:
        text = format_calibration_cache(algorithm, values, tag="8601")
        parsed = parse_calibration_cache(text, strict=True)
        assert parsed.scales == values and rewrite(parsed) == text

    lenient_or_located()
    round_trip()
