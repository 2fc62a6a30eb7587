"""The typed per-test record: golden verdicts keep what the golden workflow reported, typed."""

from __future__ import annotations

from pytest_trt.pytest_plugin.record import GoldenVerdict, ItemRecord

REPORTED = {
    "config_hash": "abc", "verdict": "fail", "message": "L2 delta 0.18 > threshold 0.05", "test": "t.py::test_a",
    "golden": "golden/m.h5", "generation": 3,
    "detail": {"checks": [
        {"output": "logits", "metric": "l2_delta", "status": "fail", "text": "", "value": 0.18, "threshold": 0.05},
        {"output": "logits", "metric": "cosine", "status": "pass", "text": "", "value": 0.99, "threshold": None},
    ]},
    "outputs": {"logits": {"samples": 8}},
    "l2_delta": 0.18,  # anything else the workflow adds is kept
}


def test_verdict_is_typed_and_round_trips_to_the_same_mapping() -> None:
    v = GoldenVerdict.from_mapping(REPORTED)
    assert (v.config_hash, v.verdict, v.generation, v.golden) == ("abc", "fail", 3, "golden/m.h5")
    assert v.thresholds == {"logits.l2_delta": 0.05}
    assert v.metrics == {"logits.l2_delta": 0.18, "logits.cosine": 0.99}
    assert v.extra == {"l2_delta": 0.18}
    assert v.to_dict() == REPORTED  # golden.json is written as before


def test_verdicts_are_matched_to_their_engine() -> None:
    class _Result:
        config_hash = "abc"

    class _Engine:
        result = _Result()

    record = ItemRecord()
    record.add_verdict(REPORTED)
    record.add_verdict({**REPORTED, "config_hash": "other"})
    engine = _Engine()
    record.use(engine)  # type: ignore[arg-type]
    record.use(engine)  # type: ignore[arg-type]
    assert len(record.engines) == 1
    assert [v.config_hash for v in record.golden] == ["abc", "other"]
