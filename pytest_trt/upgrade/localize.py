"""``--localize``: the first ONNX node whose output diverges, found by bisection over exposed tensors.

For a regressed config that ONNX Runtime can run, two comparisons are made on a few
samples of the golden dataset:

1. the NEW engine (the config's graph optimizations) against the unoptimized
   reference of the same model (``ORT_DISABLE_ALL``): a fusion or kernel that
   changed the numerics;
2. OLD against NEW, where both models are on disk: a changed model or backend.

Nodes are taken in topological order.  Each bisection step exposes *one* node's
output as an extra graph output of both sides (so every other fusion stays as
built), runs both, and compares by relative L2 error; divergence is assumed to
persist downstream, so about log2(nodes) runs find the first node beyond
tolerance.  One last run exposes a few nodes on the path from it to the graph
output, to show how the error grows.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trt.upgrade.model import REGRESSION, ConfigReview, UpgradeReport

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

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "group": list(self.group), "steps": self.steps, "compared": self.compared,
                "path": [{"node": n, "error": e} for n, e in self.path], "note": self.note}


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
    """Bisect the nodes ``a`` and ``b`` share, in ``b``'s topological order."""
    names_a = {n.name for n in a.model.graph.node}
    nodes = [n for n in b.model.graph.node if n.name in names_a and b.outputs_of(n) and a.outputs_of(n)]
    errors: dict[int, float] = {}

    def error(i: int) -> float:
        if i not in errors:
            tensor = b.outputs_of(nodes[i])[0]
            errors[i] = rel_l2(a.run([tensor], feeds)[tensor], b.run([tensor], feeds)[tensor])
        return errors[i]

    first = _bisect(nodes, lambda i: error(i) > tolerance)
    steps = len(errors)
    if first is None:
        return Localization(None, (), steps, compared, (), f"no node diverges beyond {tolerance:g} ({compared})")
    idx = _path(nodes, first)
    tensors = [b.outputs_of(nodes[i])[0] for i in idx]
    va, vb = a.run(tensors, feeds), b.run(tensors, feeds)
    path = tuple((nodes[i].name, rel_l2(va[t], vb[t])) for i, t in zip(idx, tensors, strict=True))
    return Localization(nodes[first].name, (), steps, compared, path)


def _model(path: str, sha256: str | None) -> Any:
    import onnx

    data = Path(path).read_bytes()
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise FileNotFoundError(f"{path} changed since the run (sha256 differs from the bundle's)")
    return onnx.load_from_string(data)


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


def localize_review(review: ConfigReview) -> dict[str, Any]:
    """Localization of one regressed ONNX Runtime config, or a note saying why none was made."""
    new, old = review.new, review.old
    if new is None or new.bundle is None or new.backend != "onnxruntime":
        return {"node": None, "note": "localization needs an ONNX Runtime engine on the NEW side"}
    conf = new.bundle.config
    level = str(((conf.get("effective") or {}).get("ort") or {}).get("graph_optimization_level") or "all")
    try:
        new_model = _model(conf["pinned"]["onnx"], conf.get("onnx_sha256"))
        feeds = _feeds(review, new_model)
        engine, reference = Runner(new_model, level), Runner(new_model, "disabled")
        found = localize_pair(reference, engine, feeds, compared="engine vs unoptimized reference")
        steps = found.steps
        if found.node is None and old is not None and old.bundle is not None:
            oc = old.bundle.config
            old_model = _model(oc["pinned"]["onnx"], oc.get("onnx_sha256"))
            old_level = str(((oc.get("effective") or {}).get("ort") or {}).get("graph_optimization_level") or "all")
            second = localize_pair(Runner(old_model, old_level), engine, feeds, compared="OLD vs NEW")
            found = dataclasses.replace(second, steps=steps + second.steps,
                                        note="the NEW engine matches its unoptimized reference; OLD and NEW differ")
    except (OSError, KeyError, ValueError) as exc:
        return {"node": None, "note": f"not localized: {exc}"}
    if found.node is not None:
        found = dataclasses.replace(found, group=_group(review, found.node))
    return found.to_dict()


def localize_report(report: UpgradeReport) -> UpgradeReport:
    """The report with a localization on every regressed config."""
    reviews = tuple(dataclasses.replace(r, localization=localize_review(r)) if r.verdict == REGRESSION else r
                    for r in report.reviews)
    return dataclasses.replace(report, reviews=reviews)
