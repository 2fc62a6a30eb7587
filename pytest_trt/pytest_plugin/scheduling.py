"""The controller's xdist scheduler under ``--dist loadgroup``: one group of tests is one unit of work.

It is pytest-xdist's own ``LoadGroupScheduling`` (whole groups to workers, the other tests one by one); only
the group of a test id comes from the files the workers wrote (:func:`~pytest_trt.pytest_plugin.grouping.read_groups`),
read when the first test is scheduled, every worker's collection being in by then.  A test whose id carries
xdist's own ``@group`` suffix and no group in the files is split by xdist's rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

from pytest_trt.pytest_plugin.grouping import GROUPS_DIR_KEY, read_groups


class ConfigGroupScheduling(LoadGroupScheduling):  # type: ignore[misc]  # pytest-xdist ships no type hints
    def __init__(self, config: pytest.Config, log: Any, folder: Path) -> None:
        super().__init__(config, log)
        self.folder = folder
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked in schedule(), after every worker reported its collection
            self._groups = read_groups(self.folder)
        group = self._groups.get(nodeid)
        if group is not None:
            return group
        return str(super()._split_scope(nodeid))


class GroupsFolder:
    """The xdist controller's side under ``--dist loadgroup`` (registered by the session): the folder the workers
    write their groups into, named in each worker's ``workerinput``, read by the scheduler, removed at the end."""

    NAME = "trt-xdist-groups"

    def __init__(self) -> None:
        self.folder: Path | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.folder is None:
            import tempfile

            self.folder = Path(tempfile.mkdtemp(prefix="pytest-trt-xdist-groups-"))
        node.workerinput[GROUPS_DIR_KEY] = str(self.folder)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """xdist's group scheduling with the groups the workers wrote (pytest 9.2 keeps xdist from writing them
        into the test ids)."""
        if self.folder is None:
            return None
        return ConfigGroupScheduling(config, log, self.folder)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.folder is not None:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)
