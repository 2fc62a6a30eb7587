"""Stash keys shared by the plugin's hook modules (run state lives in stashes, never on ``config``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    pass

#: config.stash: the session's engine provider (backend, cache, engines built or loaded)
PROVIDER = pytest.StashKey["EngineProvider"]()
#: item.stash: engines a test used, in order of first use
ITEM_ENGINES = pytest.StashKey["list[Engine]"]()
