"""canonical_json takes a faster road for ASCII-only documents; the bytes must be the one canonical spelling."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_trt.audit.bundle import canonical_json

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _spec(data: Any) -> bytes:
    # the spelling bundles have always used: sorted keys, compact, UTF-8 (not \u escapes), final newline
    return (json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


@given(_JSON)
def test_same_bytes_as_the_canonical_spelling(data: Any) -> None:
    assert canonical_json(data) == _spec(data)


def test_edge_cases() -> None:
    for data in ({"a": "caf\u00e9"}, {"a": "\x1b[0m"}, {"a": "\\u00e9"}, {"\u00e9": 1, "b": "\\"}, {"log": "\u2028"}):
        assert canonical_json(data) == _spec(data), data
    assert canonical_json({"a": "caf\u00e9"}) == '{"a":"café"}\n'.encode()
