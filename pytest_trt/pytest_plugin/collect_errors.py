"""A pytest-trt error raised while a test module imports is that module's error, not the session's.

A bad ``BuildConfig`` at module level (unknown precision, profile min > max, a TOML
typo) raises :class:`~pytest_trt.errors.ConfigError` during collection.  Left alone,
pytest shows the plugin's internal frames and interrupts the whole session ("1 error
during collection"), so unrelated modules report nothing.  Here the module collects
as one item whose setup errors with the message alone; every other module runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_trt.errors import TrtError

#: name of the item standing in for a module whose import raised a pytest-trt error
ITEM_NAME = "[pytest-trt: module not importable]"


class ModuleErrorItem(pytest.Item):
    """Errors in setup with the message of the pytest-trt error the module raised on import."""

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message

    def setup(self) -> None:
        pytest.fail(self.message, pytrace=False)

    def runtest(self) -> None:  # pragma: no cover - setup always fails
        pass

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, ITEM_NAME


def module_error_message(path: Path, exc: TrtError) -> str:
    return (
        f"{path}: importing this test module raised {type(exc).__name__}: {exc.message}\n"
        "Fix the configuration above; the other test modules ran."
    )


def make_collect_report(collector: pytest.Module) -> pytest.CollectReport | None:
    """The module's collect report when importing it raised a pytest-trt error; None lets pytest collect it."""
    from pytest_trt.common.relpaths import deferring

    try:
        with deferring():  # a config whose ONNX file is missing fails its own tests (BuildConfig.check_files)
            collector.obj  # noqa: B018 - imports the module; pytest caches it for collection
    except TrtError as exc:
        item = ModuleErrorItem.from_parent(collector, name=ITEM_NAME, message=module_error_message(collector.path, exc))
        return pytest.CollectReport(collector.nodeid, "passed", None, [item])
    except BaseException:
        return None  # any other problem: pytest reports it as usual
    return None
