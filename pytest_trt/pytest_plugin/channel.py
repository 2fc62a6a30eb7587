"""What a pytest-xdist worker sends its controller at the end: one JSON-able document under one key."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

#: the one ``workeroutput`` key of pytest-trt
KEY = "pytest_trt"


@dataclass
class WorkerOutput:
    """Engine rows, cache write errors, bundles written, bundle failures and golden summary lines of one process."""

    engines: list[dict[str, Any]] = field(default_factory=list)
    cache_errors: list[str] = field(default_factory=list)
    bundles: list[dict[str, Any]] = field(default_factory=list)
    bundle_failures: list[str] = field(default_factory=list)
    golden_refreshed: list[tuple[str, str]] = field(default_factory=list)  # (test id, what the refresh changed)
    golden_notes: list[tuple[str, str]] = field(default_factory=list)  # (test id, provenance note)

    def send(self, workeroutput: dict[str, Any]) -> None:
        """Into the worker's ``workeroutput`` as plain lists: pytest-xdist serializes them as they are (rows of
        JSON-able values; ``dataclasses.asdict`` would deep-copy every value of every row first)."""
        workeroutput[KEY] = {f.name: list(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def received(cls, workeroutput: dict[str, Any]) -> WorkerOutput:
        doc = workeroutput.get(KEY) or {}
        return cls(**{k: list(doc.get(k, [])) for k in cls.__dataclass_fields__})

    def merge(self, other: WorkerOutput) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))
