"""Stash keys shared by the plugin's hook modules (run state lives in stashes, never on ``config``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_trt.engine import Engine
    from pytest_trt.session import EngineProvider

#: config.stash: the session's engine provider (backend, cache, engines built or loaded)
PROVIDER: pytest.StashKey[EngineProvider] = pytest.StashKey()
#: item.stash: engines a test used, in order of first use
ITEM_ENGINES: pytest.StashKey[list[Engine]] = pytest.StashKey()
#: item.stash: golden verdicts of the test, one mapping per check, each with at least
#: ``config_hash`` (the engine's) and ``verdict`` ("pass", "updated", "fail", "missing",
#: "tainted"); the rest is JSON-able and goes into the bundle's golden.json.
GOLDEN_VERDICTS: pytest.StashKey[list[Mapping[str, Any]]] = pytest.StashKey()
#: item.stash: the BuildFailed of the test's engine, for the build-failure note an upgrade report reads
BUILD_FAILED: pytest.StashKey[Exception] = pytest.StashKey()
#: config.stash: builds the session's provider on first use (a run without trt tests never needs it)
PROVIDER_FACTORY: pytest.StashKey[Callable[[], EngineProvider]] = pytest.StashKey()


def provider_of(config: pytest.Config) -> EngineProvider:
    """The session's engine provider, created on first use by a trt test, fixture or header."""
    provider = config.stash.get(PROVIDER, None)
    if provider is None:
        provider = config.stash[PROVIDER] = config.stash[PROVIDER_FACTORY]()
    return provider
