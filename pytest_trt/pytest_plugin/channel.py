"""What a pytest-xdist worker sends its controller: one JSON document at the end, and each test report's
user properties and sections as one JSON string (with the ``trt`` mark's keyword, where the report has it).

execnet, which carries them, serializes in pure Python one value at a time (some 13 calls for each junit property
of each report), and a string in a few calls; the JSON is made and read by the ``json`` module's C code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_trt.options import MARKER

#: the one ``workeroutput`` key of pytest-trt
KEY = "pytest_trt"
#: the key of a serialized test report that holds its user properties and sections (a worker's, see pack_report)
REPORT_KEY = "pytest_trt_packed"
#: the property values that come back from JSON as they went in
_SCALARS = (str, int, float, bool, type(None))
#: the keyword every report of a trt test carries (the mark's name): inside the packed string, not a keyword entry
#: serialized on its own
_KEYWORD = MARKER


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
        """Into the worker's ``workeroutput`` as one JSON string: execnet, which carries it to the controller,
        serializes a string in a few Python calls, but every value of every row one by one."""
        workeroutput[KEY] = json.dumps({f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def received(cls, workeroutput: dict[str, Any]) -> WorkerOutput:
        text = workeroutput.get(KEY)
        doc = json.loads(text) if text else {}
        out = cls(**{k: list(doc.get(k, [])) for k in cls.__dataclass_fields__})
        out.golden_refreshed = [(a, b) for a, b in out.golden_refreshed]  # JSON has no tuples
        out.golden_notes = [(a, b) for a, b in out.golden_notes]
        return out

    def merge(self, other: WorkerOutput) -> None:
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name))


def pack_report(data: dict[str, Any]) -> None:
    """A worker's serialized test report: its user properties and sections into one JSON string under
    :data:`REPORT_KEY`, when each comes back from JSON unchanged (str names and sections, scalar values); else
    left as they are.  The ``trt`` keyword rides in the same string.  The controller's :func:`unpack_report` puts
    them back before pytest makes the report."""
    props = data.get("user_properties") or []
    sections = data.get("sections") or []
    if not (props or sections) or not (_pairs(props, _SCALARS) and _pairs(sections, (str,))):
        return
    packed: list[Any] = [props, sections]
    keywords = data.get("keywords")
    if type(keywords) is dict and _KEYWORD in keywords and type(keywords[_KEYWORD]) in _SCALARS:
        keywords = data["keywords"] = dict(keywords)  # the report's own dict, which the worker goes on using
        packed.append(keywords.pop(_KEYWORD))
    data[REPORT_KEY] = json.dumps(packed)
    data["user_properties"] = []
    data["sections"] = []


def _pairs(items: list[Any], second: tuple[type, ...]) -> bool:
    """Whether every item is a ``(str, <a type of second>)`` tuple; by builtins alone (no Python call per item:
    this runs for every report a worker sends)."""
    if not items:
        return True
    if set(map(type, items)) != {tuple} or set(map(len, items)) != {2}:
        return False
    names, values = zip(*items, strict=True)
    return set(map(type, names)) == {str} and set(map(type, values)) <= set(second)


def unpack_report(data: dict[str, Any]) -> None:
    """The user properties and sections a worker packed (:func:`pack_report`), back as lists of pairs."""
    text = data.pop(REPORT_KEY, None)
    if text is None:
        return
    packed = json.loads(text)
    data["user_properties"] = [(name, value) for name, value in packed[0]]
    data["sections"] = [(name, content) for name, content in packed[1]]
    if len(packed) > 2:
        data["keywords"][_KEYWORD] = packed[2]
