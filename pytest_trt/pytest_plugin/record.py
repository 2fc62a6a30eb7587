"""What one test did with pytest-trt: engines used, golden verdicts, the build failure.

Kept in ``item.stash`` by :meth:`pytest_trt.pytest_plugin.session.TrtSession.record`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_trt.engines.engine import Engine
    from pytest_trt.errors import TrtError

#: keys of a verdict mapping that are fields of :class:`GoldenVerdict`; any other key goes to ``extra``
_FIELDS = ("config_hash", "verdict", "message", "test", "golden", "generation", "detail", "outputs")


@dataclass(frozen=True)
class GoldenVerdict:
    """How one golden check of one engine ended, as the bundle's golden.json stores it.

    ``verdict`` is "pass", "updated", "fail", "missing", "tainted", "skipped", ...;
    ``detail`` is the verdict's rule table (every metric checked, with its value and
    threshold), ``outputs`` the per-output figures.
    """

    config_hash: str
    verdict: str
    message: str | None = None
    test: str | None = None
    golden: str | None = None
    generation: int | None = None
    detail: Mapping[str, Any] | None = None
    outputs: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the mapping as reported, written to golden.json unchanged (same keys, same bytes as before)
    data: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> GoldenVerdict:
        """From the mapping the golden workflow reports (``GoldenCheck(on_verdict=...)``)."""
        known = {k: data[k] for k in _FIELDS if k in data}
        generation = known.get("generation")
        return cls(
            config_hash=str(known.get("config_hash", "")),
            verdict=str(known.get("verdict", "?")),
            message=known.get("message"),
            test=known.get("test"),
            golden=None if known.get("golden") is None else str(known["golden"]),
            generation=None if generation is None else int(generation),
            detail=known.get("detail"),
            outputs=known.get("outputs"),
            extra={k: v for k, v in data.items() if k not in _FIELDS},
            data=dict(data),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able mapping of the bundle's golden.json (as reported, when made by :meth:`from_mapping`)."""
        if self.data:
            return dict(self.data)
        out: dict[str, Any] = {"config_hash": self.config_hash, "verdict": self.verdict, "message": self.message,
                               "test": self.test}
        for key in ("golden", "generation", "detail", "outputs"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.extra)
        return out

    def _checks(self) -> list[Mapping[str, Any]]:
        checks = (self.detail or {}).get("checks") or ()
        return [c for c in checks if isinstance(c, Mapping)]

    @property
    def thresholds(self) -> dict[str, float]:
        """``{"<output>.<metric>": threshold}`` of every metric checked against a threshold."""
        return {f"{c.get('output')}.{c.get('metric')}": float(c["threshold"]) for c in self._checks()
                if c.get("threshold") is not None}

    @property
    def metrics(self) -> dict[str, float]:
        """``{"<output>.<metric>": value}`` of every metric computed."""
        return {f"{c.get('output')}.{c.get('metric')}": float(c["value"]) for c in self._checks()
                if c.get("value") is not None}


@dataclass
class ItemRecord:
    """The per-test record: filled by the fixtures and the golden check, read by the audit layer."""

    engines: list[Engine] = field(default_factory=list)  # in order of first use
    golden: list[GoldenVerdict] = field(default_factory=list)
    build_failure: TrtError | None = None  # the engine could not be built (an upgrade report's "could not build")
    audited: bool = False  # bundles written and the report section added (once per test)

    def use(self, engine: Engine) -> None:
        if engine not in self.engines:
            self.engines.append(engine)

    def add_verdict(self, data: Mapping[str, Any]) -> None:
        self.golden.append(GoldenVerdict.from_mapping(data))

