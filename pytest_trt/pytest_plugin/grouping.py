"""xdist scheduling by config: under ``--dist loadgroup`` the tests of one BuildConfig run in one worker.

Each worker that runs a config's first test loads its engine (cache entry read, engine deserialized, the
ONNX and engine digests taken from their stamps or hashed); with every test of a config in one group, a
config is loaded once per session instead of once per worker that happens to get one of its tests.
A test that already has an ``xdist_group`` mark keeps its own grouping; a config with one test is not grouped.

pytest-xdist sends the controller only the test ids; it writes a test's groups into its id, which pytest 9.2
no longer lets a plugin change.  So the first worker (:data:`GROUPS_WRITER`) also writes the tests' groups
(:func:`write_groups`) into a folder the controller made and named in ``workerinput`` (:data:`GROUPS_DIR_KEY`),
before it reports its collection; the controller's scheduler (:mod:`pytest_trt.pytest_plugin.scheduling`) reads
them (:func:`read_groups`) once every worker has reported, and hands out one group as one unit of work.  Without
the file (that worker lost before it collected) the tests are handed out one by one: each still runs once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_trt.config import BuildConfig

#: the prefix of the groups this module makes (the rest is a digest of the config)
GROUP_PREFIX = "trt-"
#: the ``workerinput`` key naming the folder where a worker writes the tests' groups
GROUPS_DIR_KEY = "trt_xdist_groups_dir"
#: the worker that writes them: every worker collects the same tests (pytest-xdist checks), so one file is enough
GROUPS_WRITER = "gw0"


def group_name(config: BuildConfig) -> str:
    """The same name in every worker for equal configs (the ONNX path included; its bytes are not read)."""
    data = json.dumps(config.to_json(None), sort_keys=True, default=str)
    return GROUP_PREFIX + hashlib.sha256(data.encode()).hexdigest()[:16]


def group_by_config(marked: Iterable[tuple[pytest.Item, pytest.Mark]]) -> None:
    """Add ``xdist_group(name=<config>)`` to the trt tests without an xdist_group mark of their own, where a config
    has two or more such tests (one test is one unit of work already: a group would only cost its collection).
    Equal configs are one config, also as separate objects (their group names are equal)."""
    tests: dict[int, list[pytest.Item]] = {}  # config object -> its tests without a group of their own
    objects: dict[tuple[str, str], dict[int, BuildConfig]] = {}  # (name, version) -> the config objects
    for item, mark in marked:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        config = mark.args[0]
        tests.setdefault(id(config), []).append(item)
        objects.setdefault((config.name, config.version), {})[id(config)] = config
    for same_name in objects.values():  # only objects of one name and version can be equal: name those alone
        if sum(len(tests[key]) for key in same_name) < 2:
            continue  # the one test of this name and version: no group to make, no config to digest
        by_group: dict[str, list[pytest.Item]] = {}
        for key, config in same_name.items():
            by_group.setdefault(group_name(config), []).extend(tests[key])
        for name, items in by_group.items():
            if len(items) > 1:
                group = pytest.mark.xdist_group(name=name)  # one mark, shared by the config's tests
                for item in items:
                    item.add_marker(group)


def item_group(item: pytest.Item) -> str | None:
    """The group of a test as pytest-xdist names it: its ``xdist_group`` names, sorted and joined by ``_``."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) if names else None


def write_groups(folder: Path, worker: str, items: Iterable[pytest.Item]) -> None:
    """``<folder>/<worker>.json``: test id -> group, for the tests that have one (written whole, by rename)."""
    from pytest_trt.common.fileio import write_json_atomic

    groups = {item.nodeid: group for item in items if (group := item_group(item)) is not None}
    write_json_atomic(folder / f"{worker}.json", groups, fsync=False)  # read by the controller, then removed


def read_groups(folder: Path) -> dict[str, str]:
    """Test id -> group, from the workers' files in ``folder`` (none: no groups)."""
    groups: dict[str, str] = {}
    for path in sorted(folder.glob("*.json")):
        groups.update(json.loads(path.read_bytes()))
    return groups
