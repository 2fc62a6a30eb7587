"""xdist scheduling by config: under ``--dist loadgroup`` the tests of one BuildConfig run in one worker.

Each worker that runs a config's first test loads its engine (cache entry read, engine deserialized, the
ONNX and engine digests taken from their stamps or hashed); with every test of a config in one group, a
config is loaded once per session instead of once per worker that happens to get one of its tests.
A test that already has an ``xdist_group`` mark keeps its own grouping.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import pytest

from pytest_trt.config import BuildConfig

#: the prefix of the groups this module makes (the rest is a digest of the config)
GROUP_PREFIX = "trt-"


def group_name(config: BuildConfig) -> str:
    """The same name in every worker for equal configs (the ONNX path included; its bytes are not read)."""
    data = json.dumps(config.to_json(None), sort_keys=True, default=str)
    return GROUP_PREFIX + hashlib.sha256(data.encode()).hexdigest()[:16]


def group_by_config(marked: Iterable[tuple[pytest.Item, pytest.Mark]]) -> None:
    """Add ``xdist_group(name=<config>)`` to each trt test without an xdist_group mark of its own."""
    names: dict[int, str] = {}
    for item, mark in marked:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        config = mark.args[0]
        name = names.get(id(config))
        if name is None:
            name = names[id(config)] = group_name(config)
        item.add_marker(pytest.mark.xdist_group(name=name))
