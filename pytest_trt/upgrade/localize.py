"""``--localize``: the first ONNX node whose output diverges, found by bisection over exposed tensors.

For a regressed config, the models the engines were actually built from (the Q/DQ model of a
calibrated config, see :mod:`pytest_trt.upgrade.built_models`) are compared on a few samples of the
golden dataset, on ONNX Runtime whatever backend built the engines:

1. when the pin (config hash) or the toolchain changed: OLD's built model against NEW's, both
   unoptimized (``ORT_DISABLE_ALL``): a changed model, calibration or quantizer;
2. for an ONNX Runtime engine of a plain (float) model: the NEW engine (the config's graph
   optimizations) against the unoptimized reference of the same model: a fusion or kernel that
   changed the numerics.  A Q/DQ engine is not compared with its Q/DQ reference: INT8 kernels are
   not the Q/DQ emulation, so that difference is rounding, not a regression.

Nodes are matched across the two models by the tensor they produce (a node renamed or replaced
between OLD and NEW still matches) and taken in NEW's topological order.  Each bisection step exposes *one* node's
output as an extra graph output of both sides (so every other fusion stays as
built), runs both, and compares by relative L2 error; divergence is assumed to
persist downstream, so about log2(nodes) runs find the first node beyond
tolerance.  One last run exposes a few nodes on the path from it to the graph
output, to show how the error grows.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_trt.upgrade.model import REGRESSION, ConfigReview, UpgradeReport

if TYPE_CHECKING:
    from pytest_trt.upgrade.built_models import BuiltModel

TOLERANCE = 1e-3
SAMPLES = 8
PATH_POINTS = 8


@dataclass(frozen=True)
class Localization:
    node: str | None
    group: tuple[str, ...]
    steps: int
    compared: str  # "engine vs unoptimized reference" or "OLD vs NEW"
    path: tuple[tuple[str, float], ...]  # (node, relative L2 error) from the node towards the output
    note: str = ""
    replaces: str | None = None  # OLD's producer of the same tensor, when its name differs
    tensor: str | None = None  # the tensor the node produces (the one compared)

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "group": list(self.group), "steps": self.steps, "compared": self.compared,
                "path": [{"node": n, "error": e} for n, e in self.path], "note": self.note,
                "replaces": self.replaces, "tensor": self.tensor, "bisected": self.node is not None}


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a64.shape != b64.shape:
        return float("inf")
    return float(np.linalg.norm(a64 - b64) / max(float(np.linalg.norm(a64)), 1e-12))


class Runner:
    """Runs one ONNX model on ONNX Runtime with chosen node outputs exposed (one session per exposure)."""

    def __init__(self, model: Any, level: str) -> None:
        import onnx

        self.model = onnx.shape_inference.infer_shapes(model)
        self.level = level
        self.types = {vi.name: vi for vi in [*self.model.graph.value_info, *self.model.graph.output]}
        self.runs = 0

    def outputs_of(self, node: Any) -> list[str]:
        return [o for o in node.output if o in self.types]

    def run(self, tensors: Sequence[str], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import onnx
        import onnxruntime as ort

        from pytest_trt.backends.onnxruntime import LEVELS

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        present = {o.name for o in model.graph.output}
        for name in tensors:
            if name not in present:
                model.graph.output.append(self.types[name])
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS.get(self.level, "ORT_ENABLE_ALL"))
        so.intra_op_num_threads = 1
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.runs += 1
        values = session.run(list(tensors), dict(feeds))
        return dict(zip(tensors, values, strict=True))


def _bisect(nodes: Sequence[Any], diverged: Callable[[int], bool]) -> int | None:
    """Index of the first node for which ``diverged`` holds (assumed monotone), None when none does."""
    if not nodes or not diverged(len(nodes) - 1):
        return None
    return bisect.bisect_left(range(len(nodes)), True, hi=len(nodes) - 1, key=diverged)


def _path(nodes: Sequence[Any], first: int) -> list[int]:
    """Indices of nodes downstream of ``first`` that feed a graph output, a few evenly spaced."""
    reach = set(nodes[first].output)
    down = [first]
    for i in range(first + 1, len(nodes)):
        if reach & set(nodes[i].input):
            reach |= set(nodes[i].output)
            down.append(i)
    if len(down) <= PATH_POINTS:
        return down
    picks = np.linspace(0, len(down) - 1, PATH_POINTS).round().astype(int)
    return [down[int(i)] for i in dict.fromkeys(picks.tolist())]


def localize_pair(a: Runner, b: Runner, feeds: Mapping[str, np.ndarray], *, tolerance: float = TOLERANCE,
                  compared: str) -> Localization:
    """Bisect ``b``'s nodes, in ``b``'s topological order, whose first exposable output ``a`` also has.

    Nodes are matched by the tensor they produce, not by name: a node OLD names otherwise (a Relu
    replaced by a Clip writing the same tensor) is still compared, and reported with OLD's name.
    """
    producers = {o: n.name for n in a.model.graph.node for o in n.output}
    nodes = [n for n in b.model.graph.node if b.outputs_of(n) and b.outputs_of(n)[0] in a.types]
    errors: dict[int, float] = {}

    def error(i: int) -> float:
        if i not in errors:
            tensor = b.outputs_of(nodes[i])[0]
            errors[i] = rel_l2(a.run([tensor], feeds)[tensor], b.run([tensor], feeds)[tensor])
        return errors[i]

    first = _bisect(nodes, lambda i: error(i) > tolerance)
    steps = len(errors)
    if not nodes:
        return Localization(None, (), 0, compared, (), f"no tensor is produced on both sides ({compared})")
    if first is None:
        return Localization(None, (), steps, compared, (), f"no node diverges beyond {tolerance:g} ({compared})")
    idx = _path(nodes, first)
    tensors = [b.outputs_of(nodes[i])[0] for i in idx]
    va, vb = a.run(tensors, feeds), b.run(tensors, feeds)
    path = tuple((nodes[i].name, rel_l2(va[t], vb[t])) for i, t in zip(idx, tensors, strict=True))
    tensor = tensors[0]
    old_name = producers.get(tensor)
    return Localization(nodes[first].name, (), steps, compared, path,
                        replaces=old_name if old_name not in (None, nodes[first].name) else None, tensor=tensor)


def _feeds(review: ConfigReview, model: Any) -> dict[str, np.ndarray]:
    from pytest_trt.golden.store import GoldenFile

    golden = None
    assert review.new is not None and review.new.bundle is not None
    for check in (review.new.bundle.golden or {}).values():
        golden = (check.get("outputs") or {}).get("golden_file") or golden
    if golden is None:
        raise FileNotFoundError("the NEW bundle names no golden file")
    wanted = [i.name for i in model.graph.input]
    with GoldenFile(Path(golden)) as g:
        inputs = g.inputs()
        return {name: np.asarray(inputs[name][:SAMPLES]) for name in wanted}


def _group(review: ConfigReview, node: str) -> tuple[str, ...]:
    record = review.new.bundle.record() if review.new is not None and review.new.bundle is not None else None
    for layer in record.layers if record is not None else ():
        if node in layer.origins:
            return tuple(dict.fromkeys(layer.origins))
    return (node,)


def _unbisected(reason: str, steps: int = 0) -> dict[str, Any]:
    return {"node": None, "bisected": False, "reason": reason, "note": f"not localized: {reason}", "steps": steps}


def _level(side: Any) -> str:
    return str(((side.bundle.config.get("effective") or {}).get("ort") or {}).get("graph_optimization_level")
               or "all")


def _qdq_text(model: Any, node: str, old: BuiltModel, new: BuiltModel) -> tuple[str, str] | None:
    """(tensor, sentence) when ``node`` is a QuantizeLinear/DequantizeLinear of NEW's Q/DQ model."""
    by_name = {n.name: n for n in model.graph.node}
    producer = {o: n for n in model.graph.node for o in n.output}
    n = by_name.get(node)
    if n is None or n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
        return None
    tensor = n.input[0]
    if n.op_type == "DequantizeLinear" and tensor in producer and producer[tensor].op_type == "QuantizeLinear":
        tensor = producer[tensor].input[0]
    where = (" (graph input)" if tensor in {i.name for i in model.graph.input} else
             " (weight)" if tensor in {i.name for i in model.graph.initializer} else "")

    def rng(r: tuple[float, float] | None) -> str:
        return "none" if r is None else f"[{r[0]:.4g}, {r[1]:.4g}]"

    return tensor, (f"Q/DQ of tensor '{tensor}'{where}, range {rng(old.ranges.get(tensor))} -> "
                    f"{rng(new.ranges.get(tensor))}")


def localize_review(review: ConfigReview, *, cache_dir: Path | None = None) -> dict[str, Any]:
    """Localization of one regressed config on the models its engines were built from, or why there is none."""
    from pytest_trt.upgrade.built_models import built_model

    new, old = review.new, review.old
    if new is None or new.bundle is None or old is None or old.bundle is None:
        return _unbisected("a side has no usable bundle")
    bm_new, bm_old = built_model(new, cache_dir=cache_dir), built_model(old, cache_dir=cache_dir)
    for side, bm in (("NEW", bm_new), ("OLD", bm_old)):
        if isinstance(bm, str):
            return _unbisected(f"{side}: {bm}")
    assert not isinstance(bm_new, str) and not isinstance(bm_old, str)
    pin_moved = (old.bundle.config.get("config_hash") != new.bundle.config.get("config_hash")
                 or (old.backend, old.backend_version) != (new.backend, new.backend_version))
    try:
        new_model = bm_new.load()
        feeds = _feeds(review, new_model)
        steps, found = 0, None
        reference = Runner(new_model, "disabled")
        if pin_moved:
            old_runner = Runner(bm_old.load(), "disabled")
            outputs = [o.name for o in new_model.graph.output if o.name in old_runner.types]
            if outputs and all(rel_l2(x, y) <= TOLERANCE for x, y in zip(
                    old_runner.run(outputs, feeds).values(), reference.run(outputs, feeds).values(), strict=True)):
                first_dim = next(iter(feeds.values())).shape[0] if feeds else 0
                return _unbisected(f"the graph outputs of OLD's and NEW's built models agree within {TOLERANCE:g} "
                                   f"(relative L2) on {first_dim} golden samples: the regression is not visible "
                                   "there, so there is nothing to bisect", steps=2)
            found = localize_pair(old_runner, reference, feeds, compared="OLD vs NEW built models")
            steps = found.steps + 2
        if (found is None or found.node is None) and new.backend == "onnxruntime" and bm_new.kind == "float":
            second = localize_pair(reference, Runner(new_model, _level(new)), feeds,
                                   compared="engine vs unoptimized reference")
            found = dataclasses.replace(second, steps=steps + second.steps)
    except (OSError, KeyError, ValueError) as exc:
        return _unbisected(str(exc))
    if found is None:
        return _unbisected("the pin and the toolchain are the same on both sides and the NEW engine is not an "
                           "ONNX Runtime float engine: nothing to compare")
    if found.node is None:
        return {**found.to_dict(), "reason": found.note}
    out = dataclasses.replace(found, group=_group(review, found.node)).to_dict()
    qdq = _qdq_text(new_model, found.node, bm_old, bm_new)
    if qdq is not None:
        out["quantized_tensor"], out["qdq"] = qdq
    return out


def localize_report(report: UpgradeReport, *, cache_dir: Path | None = None) -> UpgradeReport:
    """The report with a localization on every regressed config."""
    reviews = tuple(dataclasses.replace(r, localization=localize_review(r, cache_dir=cache_dir))
                    if r.verdict == REGRESSION else r for r in report.reviews)
    return dataclasses.replace(report, reviews=reviews)
