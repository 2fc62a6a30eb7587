"""Units: byte sizes ("1GiB", "512 MiB", 1048576), and the clock's time as RFC 3339 UTC."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: int | str) -> int:
    """Return ``value`` in bytes; raise ``ValueError`` with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"size {value!r} is a bool, expected bytes or a string like '1GiB'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size {value} is negative")
        return value
    if isinstance(value, str):
        m = _SIZE.match(value)
        if m and m.group(2).lower() in _UNITS:
            number = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if number != int(number):
                raise ValueError(f"size {value!r} is not a whole number of bytes")
            return int(number)
        if value.strip().startswith("-"):
            raise ValueError(f"size {value!r} is negative")
    raise ValueError(f"cannot read size {value!r}: use a byte count or a string like '512MiB', '1GiB', '2GB'")


def utc_now(*, microseconds: bool = True) -> str:
    """The clock's time now, UTC, RFC 3339: ``2026-03-01T12:00:00.123456Z``, or to the second without
    ``microseconds`` (a golden's provenance and approval lines)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if microseconds else "%Y-%m-%dT%H:%M:%SZ")
