"""Turn TensorRT layer names back into the ONNX node names they implement.

TensorRT builds a fused layer's name from its members.  The rules, each with an
example from a real log of the corpus:

* ``A + B`` is a vertical fusion (every version):
  ``Conv__27 + Relu_1`` (8.0.3) -> ``Conv__27``, ``Relu_1``.
* ``A || B`` is a horizontal merge (7.1.3):
  ``Conv_3 + Relu_4 || Conv_0 + Relu_1`` -> ``Conv_3``, ``Relu_4``, ``Conv_0``, ``Relu_1``.
* ``PWN(a, b)`` is a pointwise fusion and nests (8.x):
  ``PWN(247 + (Unnamed Layer* 11) [Shuffle], Add_49)`` -> ``247``, ``Add_49``.
* ``{ForeignNode[first...last]}`` is a Myelin subgraph (8.2 ..): without the ONNX
  model only the two ends are known (``{ForeignNode[node_conv2d...node_relu]}``,
  10.16.1); with it, every ONNX node between them in topological order.
* TensorRT-internal names are dropped unless ``keep_helpers=True``:
  ``Reformatting CopyNode for Input Tensor 0 to Conv-1 + ReLU-2`` (8.6.0),
  ``(Unnamed Layer* 11) [Shuffle]`` (8.6.1) and names derived from it
  (``unsqueeze_node_after_b3/read:0``, 8.2.3), ``__myl_Move_myl0_1`` and other
  ``__myl``/``__mye`` kernels (10.4, TensorRT-RTX), ``[trainStation1]`` (8.5.2),
  ``ONNXTRT_Broadcast`` / ``ONNXTRT_castHelper_9`` shuffles the ONNX parser adds (10.x).

A member name may itself contain `` + `` or brackets, so splitting is heuristic
(NOTES §3); splitting only at bracket depth 0 keeps ``(Unnamed Layer* 4178) [Shuffle]`` whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_OPEN = "([{"
_CLOSE = ")]}"
_HELPER_RE = re.compile(
    r"^(?:Reformatting CopyNode for |Reformatted (?:Input|Output) Tensor |\(Unnamed Layer\* \d+\)"
    r"|unsqueeze_node_after_|squeeze_after_|copied_squeeze_after_|__myl|__mye|\[trainStation\d*\]"
    r"|ONNXTRT_|shapeOf_|castHelper)"
)
_MYELIN_SUFFIX_RE = re.compile(r"_myl\d+_\d+$")


def _split_top(text: str, sep: str) -> list[str]:
    """Split ``text`` on ``sep`` where no bracket is open."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return parts


def _wrapped(text: str, opener: str, closer: str) -> str | None:
    """The inside of ``opener ... closer`` when they enclose the whole text."""
    if not (text.startswith(opener) and text.endswith(closer)):
        return None
    inner = text[len(opener) : len(text) - len(closer)]
    depth = 0
    for c in inner:  # the wrapper must not close early: "PWN(a) + PWN(b)" is not one PWN
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
    return inner


def is_helper(name: str) -> bool:
    """True for names TensorRT made up (reformats, unnamed shuffles, Myelin kernels)."""
    return bool(_HELPER_RE.match(name.strip()))


def foreign_range(name: str) -> tuple[str, str] | None:
    """``{ForeignNode[a...b]}`` -> ``(a, b)``; ``{ForeignNode[a]}`` -> ``(a, a)``; else None."""
    inner = _wrapped(name.strip(), "{ForeignNode[", "]}")
    if inner is None:
        return None
    ends = _split_top(inner, "...")
    if len(ends) == 2:
        return ends[0].strip(), ends[1].strip()
    return inner.strip(), inner.strip()


def split_name(name: str) -> list[str]:
    """Every member of a (possibly fused) TensorRT layer name, helpers included, in order.

    ``"features.0.0.weight + QuantizeLinear_8 + Conv_12 + PWN(Clip_16)"`` (8.2 TREx) ->
    ``["features.0.0.weight", "QuantizeLinear_8", "Conv_12", "Clip_16"]``.
    """
    text = name.strip()
    if not text:
        return []
    if text.startswith("Reformatting CopyNode for "):  # names the layer it feeds; it is one helper, not a fusion
        return [text]
    rng = foreign_range(text)
    if rng is not None:
        first, last = rng
        out = split_name(first)
        if last != first:
            out += split_name(last)
        return out
    for sep in (" || ", " + "):
        parts = _split_top(text, sep)
        if len(parts) > 1:
            return [m for p in parts for m in split_name(p)]
    inner = _wrapped(text, "PWN(", ")")
    if inner is not None:
        return [m for p in _split_top(inner, ", ") for m in split_name(p)]
    return [text]


def origins_from_name(name: str, *, onnx: OnnxIndex | None = None, keep_helpers: bool = False) -> tuple[str, ...]:
    """The ONNX node names a layer name stands for, duplicates removed, order kept.

    With ``onnx``, ``{ForeignNode[a...b]}`` expands to the nodes from ``a`` to ``b`` and
    members that are not ONNX nodes are dropped (helpers are then irrelevant).
    """
    rng = foreign_range(name)
    if onnx is not None and rng is not None:
        expanded = onnx.between(rng[0], rng[1])
        if expanded:
            return expanded
    # Myelin kernels carry a numbering suffix (``/classifier/classifier_6/Gemm_myl9_4``, 10.4)
    members = [strip_myelin_suffix(m) if not is_helper(m) else m for m in split_name(name)]
    if onnx is not None:
        members = [m for m in members if m in onnx]
    elif not keep_helpers:
        members = [m for m in members if not is_helper(m)]
    return tuple(dict.fromkeys(members))


def strip_myelin_suffix(name: str) -> str:
    """``__myl_CorrMulAddMaxMin_myl0_3`` -> ``__myl_CorrMulAddMaxMin`` (kernel numbering shifts between builds)."""
    return _MYELIN_SUFFIX_RE.sub("", name)


class OnnxIndex:
    """ONNX node names in graph order (ONNX requires graphs to be topologically sorted)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names: tuple[str, ...] = tuple(n for n in names if n)
        self._pos = {n: i for i, n in enumerate(self.names)}

    def __contains__(self, name: object) -> bool:
        return name in self._pos

    @classmethod
    def load(cls, model: Any) -> OnnxIndex:
        """From an :class:`OnnxIndex`, a path to an ``.onnx`` file or an ``onnx.ModelProto``."""
        if isinstance(model, OnnxIndex):
            return model
        if isinstance(model, (str, Path)):
            import onnx  # only when a path is given: onnx is an optional dependency

            from ..errors import LogParseError

            path = model
            try:
                model = onnx.load(str(path), load_external_data=False)
            except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, OSError, onnx's own errors
                raise LogParseError(
                    f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc}); give the .onnx file the "
                    "engine was built from", path=str(path)) from None
            if not model.graph.node:  # an empty file parses as an empty model
                raise LogParseError(
                    f"{path}: not a readable ONNX model (its graph holds no nodes); give the .onnx file the engine "
                    "was built from", path=str(path))
        graph = getattr(model, "graph", model)
        return cls(node.name for node in graph.node)

    def between(self, first: str, last: str) -> tuple[str, ...]:
        """ONNX nodes from ``first`` to ``last`` inclusive; the ends may be fused names themselves."""
        starts = [self._pos[m] for m in split_name(first) if m in self._pos]
        ends = [self._pos[m] for m in split_name(last) if m in self._pos]
        if not starts or not ends:
            return ()
        lo, hi = min(starts), max(ends)
        if lo > hi:
            return ()
        return self.names[lo : hi + 1]
