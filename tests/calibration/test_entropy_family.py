"""``assert_calibration`` matches the algorithm exactly: TensorRT's entropy calibrators are two algorithms, not one.

``EntropyCalibration`` (IInt8EntropyCalibrator, "entropy") and ``EntropyCalibration2`` (IInt8EntropyCalibrator2,
"entropy2") choose different thresholds; an upgrade that swaps one for the other must fail the assertion.  The
evidence is the real TensorRT 7.0 log and the real caches of the corpus; the expected algorithm of each is read
with this file's own regex.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_trt.buildlog import calibration_assertions as rec
from pytest_trt.buildlog.calibcache import algorithm_of_header
from pytest_trt.buildlog.readers import read_log

DATA = Path(__file__).resolve().parents[1] / "data" / "trt_logs"
TRT7 = DATA / "log_trt7.0_sampleINT8_readme_calibration_excerpt.txt"
#: the header word -> algorithm, as NVIDIA's CalibrationAlgoType names them
WORDS = {"EntropyCalibration2": "entropy2", "EntropyCalibration": "entropy", "MinMaxCalibration": "minmax",
         "LegacyCalibration": "legacy"}


def test_entropy_is_not_entropy2_on_the_real_trt7_log() -> None:
    record = read_log(TRT7)
    rec.assert_calibration(record, "entropy2")
    for other in ("entropy", "EntropyCalibration"):
        with pytest.raises(AssertionError, match=r"expected INT8 calibration with 'entropy' \(EntropyCalibration\), "
                                                 r"got 'entropy2'"):
            rec.assert_calibration(record, other)


def test_entropy2_is_not_entropy_on_a_version_1_log(tmp_path: Path) -> None:
    """The same real log as IInt8EntropyCalibrator (version 1) would write it."""
    text = TRT7.read_text()
    assert text.count("EntropyCalibration2") == 1  # the cache line: the calibrator the log names
    v1 = tmp_path / "trt7_entropy_v1.log"
    v1.write_text(text.replace("EntropyCalibration2", "EntropyCalibration"))
    record = read_log(v1)
    rec.assert_calibration(record, "entropy")
    with pytest.raises(AssertionError, match=r"expected INT8 calibration with 'entropy2' .*got 'entropy'"):
        rec.assert_calibration(record, "entropy2")


@pytest.mark.parametrize("cache", sorted(p.name for p in DATA.glob("calib_*.cache")))
def test_cache_headers_name_their_algorithm_exactly(cache: str) -> None:
    header = (DATA / cache).read_text(errors="replace").splitlines()[0]
    m = re.fullmatch(r"TRT-\d+-(\w+)", header.strip())
    assert m is not None, header
    assert algorithm_of_header(header) == WORDS[m[1]]
    v1 = header.replace("EntropyCalibration2", "EntropyCalibration")
    assert algorithm_of_header(v1) == WORDS[re.fullmatch(r"TRT-\d+-(\w+)", v1.strip())[1]]  # type: ignore[index]
