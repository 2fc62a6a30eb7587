"""Catalog queries: filters turned into one parameterised SQL statement.

Patterns: ``--backend-version 8.6.*`` is a shell-style glob; a value without
``*``/``?`` matches the version itself and every longer one below it
(``8.6`` matches ``8.6`` and ``8.6.1.6``).  ``--device A100`` matches any
device name containing the text, case-insensitively.  ``--calibration`` ignores
case, ``-`` and ``_`` (``min-max`` = ``minmax``).  ``--verdict regression``
means a golden check that failed (``fail``, or ``regression`` where a newer
golden layer records it so).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from pytest_trt.catalog.store import Catalog

VERDICT_ALIASES = {"regression": ("fail", "regression"), "fail": ("fail", "regression")}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdwy])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
#: the longest duration accepted: bundles are younger than the year 1 by far, and datetime stops there
MAX_DURATION_S = 2000 * _UNIT_S["y"]


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``3y``, ``2w``, ``30m``, ``45s``; raises ``ValueError`` with the accepted forms."""
    m = _DURATION.match(text.strip().lower())
    if m is None:
        raise ValueError(f"duration {text!r} is not a number followed by s, m, h, d, w or y (e.g. 90d, 7y)")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {text!r} is longer than {MAX_DURATION_S // _UNIT_S['y']} years; give a shorter one "
                         "(e.g. 90d, 7y)")
    return timedelta(seconds=seconds)


def parse_since(text: str, *, now: datetime | None = None) -> str:
    """An ISO date or datetime (``2026-03-01``), or a duration back from now (``30d``); ISO UTC text."""
    now = now or datetime.now(timezone.utc)
    try:
        when = now - parse_duration(text)
    except ValueError as exc:
        if _DURATION.match(text.strip().lower()):
            raise ValueError(f"--since: {exc}") from None
        try:
            when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"--since {text!r} is neither a date (2026-03-01) nor a duration (30d)") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
    try:
        return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError):
        raise ValueError(f"--since {text!r} is out of the range of dates") from None


@dataclass(frozen=True)
class Filters:
    config: str | None = None
    backend: str | None = None
    backend_version: str | None = None
    device: str | None = None
    calibration: str | None = None
    verdict: str | None = None
    engine_sha256: str | None = None
    since: str | None = None  # ISO UTC, see parse_since
    include_all: bool = False  # superseded and pruned rows too
    limit: int | None = None


def _glob(value: str) -> bool:
    return any(c in value for c in "*?[")


#: filters that narrow the rows through an index of their own (the verdict clause then probes per candidate)
_SELECTIVE = ("config", "backend", "backend_version", "device", "calibration", "engine_sha256", "since")


def _verdict_clause(f: Filters, names: tuple[str, ...]) -> str:
    """The lineage-verdict filter: a probe of ``lineage_verdicts`` by verdict alone, or per candidate row."""
    marks = ", ".join("?" * len(names))
    if not any(getattr(f, name) for name in _SELECTIVE):
        return (f"(b.path, b.engine_sha256) IN (SELECT lv.path, lv.engine_sha256 FROM lineage_verdicts lv "
                f"WHERE lv.verdict IN ({marks}))")
    return (f"EXISTS (SELECT 1 FROM lineage_verdicts lv WHERE lv.verdict IN ({marks}) "
            "AND lv.path = b.path AND lv.engine_sha256 = b.engine_sha256)")


def hex_prefix(text: str) -> str:
    """``text`` lower-cased; ``ValueError`` unless it is hexadecimal digits (at least one)."""
    prefix = text.lower()
    if not prefix or prefix.strip("0123456789abcdef"):
        raise ValueError(f"{text!r} is not a sha256 prefix (hexadecimal digits)")
    return prefix


def where(f: Filters) -> tuple[str, list[Any]]:
    """``WHERE ...`` (or ``""``) and its parameters for ``bundles b``; every filter is answered by an index."""
    clauses: list[str] = []
    params: list[Any] = []
    if f.config:
        clauses.append("b.config_name GLOB ?" if _glob(f.config) else "b.config_name = ?")
        params.append(f.config)
    if f.backend:
        clauses.append("b.backend = ?")
        params.append(f.backend)
    if f.backend_version:
        v = f.backend_version
        if _glob(v):
            clauses.append("b.backend_version GLOB ?")
            params.append(v)
        else:  # v itself, or v followed by '.' and anything: the range ['v.', 'v/') ('/' is the byte after '.')
            clauses.append("(b.backend_version = ? OR (b.backend_version >= ? AND b.backend_version < ?))")
            params += [v, v + ".", v + "/"]
    if f.device:
        like = "%" + re.sub(r"([%_\\])", r"\\\1", f.device) + "%"
        clauses.append("b.device_id IN (SELECT d.id FROM devices d WHERE d.device LIKE ? ESCAPE '\\' "
                       "OR d.device_json LIKE ? ESCAPE '\\')")
        params += [like, like]
    if f.calibration:
        clauses.append("replace(replace(lower(b.calibration_algorithm), '-', ''), '_', '') = ?")
        params.append(re.sub(r"[-_]", "", f.calibration.lower()))
    if f.verdict:
        names = VERDICT_ALIASES.get(f.verdict.lower(), (f.verdict.lower(),))
        clauses.append(_verdict_clause(f, names))
        params += list(names)
    if f.engine_sha256:
        prefix = hex_prefix(f.engine_sha256)
        clauses.append("b.engine_sha256 >= ? AND b.engine_sha256 < ?")
        params += [prefix, prefix + "g"]  # 'g' follows every hex digit
    if f.since:
        clauses.append("b.created >= ?")
        params.append(f.since)
    if not f.include_all:
        clauses.append("b.superseded_by IS NULL AND b.pruned IS NULL")
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def query(catalog: Catalog, f: Filters) -> list[dict[str, Any]]:
    """Matching bundles, oldest first, each with its lineage's verdict names and approval count."""
    return catalog.rows(*_query_sql(catalog, f))


def iter_query(catalog: Catalog, f: Filters) -> Iterator[dict[str, Any]]:
    """:func:`query`'s rows one at a time, read as they are asked for (``catalog query`` writes each out)."""
    return catalog.iter_rows(*_query_sql(catalog, f))


def _query_sql(catalog: Catalog, f: Filters) -> tuple[str, list[Any]]:
    clause, params = where(f)
    sql = (f"SELECT {catalog.public_columns('b')}, b.lineage_verdicts AS verdicts, b.lineage_approvals AS approvals "
           f"FROM bundles b {clause} ORDER BY b.created, b.sha256")
    if f.limit is not None:
        sql += f" LIMIT {int(f.limit)}"
    return sql, params


def history(catalog: Catalog, config: str, *, include_all: bool = False, since: str | None = None
            ) -> list[dict[str, Any]]:
    """Every bundle of one config over time, with its verdicts (and metrics) and approvals."""
    rows = query(catalog, Filters(config=config, include_all=include_all, since=since))
    for row in rows:
        details = catalog.details(row["sha256"])
        row["verdict_rows"] = details["verdicts"]
        row["approval_rows"] = details["approvals"]
        row["registrations"] = details["registrations"]
    return rows


def jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [jsonable_row(row) for row in rows]


def jsonable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A catalog row as ``--json`` prints it: the device's JSON parsed, flags as booleans (a new dict)."""
    row = dict(row)
    if isinstance(row.get("device_json"), str):
        row["device"] = row.get("device")
        row["device_detail"] = json.loads(row.pop("device_json"))
    for key in ("engine_included", "signature_checked"):
        if key in row:
            row[key] = bool(row[key])
    if row.get("git_dirty") is not None:
        row["git_dirty"] = bool(row["git_dirty"])
    return row
