"""Build records: structured facts of a TensorRT build, read from logs and layer JSON.

``parse_lines`` / ``parse_entries`` / ``read_log`` read logs of TensorRT 7 to 10 and
TensorRT-RTX (dialects in :mod:`.dialects`), ``read_layer_json`` reads
``--exportLayerInfo`` / IEngineInspector JSON; all produce a :class:`BuildRecord`.
:mod:`.assertions` checks fusions, precisions and warnings on a record (each assertion defined
once, ``@record_assertion`` in :mod:`.registry`, which also gives the ``Engine`` methods and the
module-level functions of ``pytest_trt``) and :func:`diff_records` says what changed between two.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..errors import UnknownNodeError

    # the record forms of the assertions, typed as defined (star-imported names count as exported)
    from .assertions import *  # noqa: F403
    from .calibration_assertions import *  # noqa: F403
    from .readers import parse_entries, parse_lines, parse_result, read_layer_json, read_log
    from .record import BuildRecord, FusionEvent, Layer, Memory, Message, Subgraph, TensorInfo
    from .record_diff import RecordDiff, diff_records

#: public name -> submodule; imported on first use, so that reading a stored record
#: (``.record``, on every cache hit) does not load the parser, dialect tables and assertions
_LAZY = {
    "UnknownNodeError": "pytest_trt.errors",
    **dict.fromkeys(("RecordDiff", "diff_records"), f"{__name__}.record_diff"),
    **dict.fromkeys(("parse_entries", "parse_lines", "parse_result", "read_layer_json", "read_log"),
                    f"{__name__}.readers"),
    **dict.fromkeys(("BuildRecord", "FusionEvent", "Layer", "Memory", "Message", "Subgraph", "TensorInfo"),
                    f"{__name__}.record"),
}


def _assertion_names() -> list[str]:
    """The record assertions (``assert_*``), by the registry their defining modules fill."""
    from . import assertions, calibration_assertions  # noqa: F401
    from .registry import REGISTRY

    return list(REGISTRY)


def __getattr__(name: str) -> Any:
    from pytest_trt.common.package import lazy_attribute

    if name.startswith("assert_"):
        return lazy_attribute(__name__, dict.fromkeys(_assertion_names(), f"{__name__}.assertions"), name)
    if name == "__all__":
        return [*_PUBLIC, *_assertion_names()]
    return lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_assertion_names()})


__all__ = [
    "BuildRecord", "FusionEvent", "Layer", "Memory", "Message", "RecordDiff", "Subgraph", "TensorInfo",
    "UnknownNodeError", "diff_records", "parse_entries", "parse_lines", "parse_result", "read_layer_json", "read_log",
]
# completed on first use with the assertion names, which come from their registry (static tools read the
# list above and the star imports)
_PUBLIC = tuple(__all__)
if not TYPE_CHECKING:
    del __all__
