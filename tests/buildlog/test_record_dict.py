"""BuildRecord.to_dict is what dataclasses.asdict gives (it skips asdict's deep copies of immutable leaves)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import pytest

from pytest_trt.buildlog import BuildRecord, read_log
from pytest_trt.buildlog.record import Memory

CORPUS = sorted((Path(__file__).parents[1] / "data" / "trt_logs").glob("log_*.txt"))


def _reference(record: BuildRecord) -> dict:
    d = dataclasses.asdict(record)  # independent: the standard library's conversion
    d["layer_counts"] = [list(x) for x in record.layer_counts]
    return d


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_to_dict_equals_asdict_on_the_corpus(path: Path) -> None:
    record = read_log(path)
    got = record.to_dict()
    assert got == _reference(record) and repr(got) == repr(_reference(record))  # same types, same order
    assert BuildRecord.from_dict(json.loads(record.to_json())) == record


class Pair(NamedTuple):
    a: int
    b: list[str]


def test_to_dict_copies_containers_and_keeps_named_tuples() -> None:
    quantization = {"class_counts": {"0": 3}, "ranges": [[0.5, 1.0]], "pair": Pair(1, ["x"])}
    record = BuildRecord(source="t", memory=Memory(), timings={"build_s": 1.5}, quantization=quantization)
    got = record.to_dict()
    assert repr(got) == repr(_reference(record))
    got["quantization"]["class_counts"]["0"] = 99
    got["quantization"]["ranges"][0][0] = 7.0
    assert record.quantization["class_counts"]["0"] == 3 and record.quantization["ranges"][0][0] == 0.5
    assert type(got["quantization"]["pair"]) is Pair and got["quantization"]["pair"].b is not quantization["pair"].b
