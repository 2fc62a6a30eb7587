"""Per-tensor quantization error of a Q/DQ model against its float model, streamed over a dataset.

Every activation the Q/DQ model quantizes (a ``QuantizeLinear`` -> ``DequantizeLinear`` pair on tensor ``T``) is
exposed as an extra graph output of both models, and each batch of samples is run through both, with every
optimization off (the Q/DQ arithmetic as written, the float model as exported).  Per tensor, sums are kept in
float64 and the batch is dropped, so memory holds one batch's activations, never the dataset's:

* *own* error: ``T`` against ``DequantizeLinear(QuantizeLinear(T))`` inside the Q/DQ model: the rounding and
  clipping of that tensor's range alone (the ranking key: it names the range that hurts, not where the damage
  shows);
* *accumulated* error: the float model's ``T`` against the Q/DQ model's dequantized ``T``: every upstream error
  included;
* weights: the float initializer against its dequantized INT8 values (per-tensor or per-channel scales).

SQNR is ``10 log10(sum x^2 / sum (x - q)^2)`` in dB (higher is better), relative L2 ``||x - q|| / ||x||``.
Each tensor names its ONNX producer and the quantized nodes that read it: the nodes to leave in float.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ACTIVATION, WEIGHT = "activation", "weight"


@dataclass(frozen=True)
class TensorError:
    """The quantization error of one tensor (activation or weight) and the ONNX nodes it belongs to."""

    tensor: str
    kind: str  # ACTIVATION or WEIGHT
    producer: str | None  # the node writing it (None: a graph input or an initializer)
    consumers: tuple[str, ...]  # the quantized nodes reading its dequantized value
    sqnr_db: float  # own error
    rel_l2: float
    clipped: float  # fraction of values outside the quantization range
    scale: float  # the largest scale (per-channel weights: the widest channel)
    accumulated_sqnr_db: float | None = None  # activations: float model vs Q/DQ model
    accumulated_rel_l2: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: _finite(getattr(self, k)) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class TensorErrors:
    """Every quantized tensor of a Q/DQ model with its error, worst (lowest own SQNR) first."""

    tensors: tuple[TensorError, ...]
    samples: int
    batches: int
    seconds: float
    float_model: str
    qdq_model: str
    quantizable: frozenset[str] = frozenset()  # nodes of op types the quantizer handles

    def ranked_nodes(self) -> list[tuple[str, float]]:
        """Nodes by the worst own SQNR of the quantized tensors they read or write, worst first (ties by name).

        A tensor's Q/DQ pair goes only when its writer and every reader are left in float: the readers quantize
        their inputs, and a writer of an op type the quantizer handles (Conv, MatMul, Mul, Clip ...) may quantize
        its output.  So a tensor counts for such a writer as much as for its readers; a node the quantizer
        passes over (Div, Exp ...) is never a candidate: leaving it "in float" would change nothing.
        """
        worst: dict[str, float] = {}
        for t in self.tensors:
            for node in {*t.consumers, *((t.producer,) if t.producer else ())} & self.quantizable:
                worst[node] = min(worst.get(node, math.inf), t.sqnr_db)
        return sorted(worst.items(), key=lambda kv: (kv[1], kv[0]))

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "batches": self.batches, "seconds": self.seconds,
                "float_model": self.float_model, "qdq_model": self.qdq_model,
                "tensors": [t.to_dict() for t in self.tensors],
                "nodes": [{"node": n, "sqnr_db": _finite(s)} for n, s in self.ranked_nodes()]}


def _finite(v: Any) -> Any:
    """JSON has no infinity: an error-free tensor's SQNR is written as null."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def sqnr_db(signal: float, noise: float) -> float:
    if noise <= 0.0:
        return math.inf
    if signal <= 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


@dataclass
class _Sums:
    signal: float = 0.0
    noise: float = 0.0
    acc_signal: float = 0.0
    acc_noise: float = 0.0
    clipped: int = 0
    count: int = 0


@dataclass(frozen=True)
class _Activation:
    tensor: str  # T, the Q/DQ model's float tensor (same name in the float model)
    dequantized: str  # the DequantizeLinear output the consumers read
    scale: float
    zero_point: int
    consumers: tuple[str, ...]


@dataclass
class QdqMap:
    """Which tensors the Q/DQ model quantizes and which nodes read them."""

    activations: list[_Activation] = field(default_factory=list)
    weights: list[TensorError] = field(default_factory=list)
    producers: dict[str, str] = field(default_factory=dict)


def _initializers(graph: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in graph.initializer}


def _constant(graph: Any, inits: Mapping[str, np.ndarray], name: str) -> np.ndarray | None:
    if name in inits:
        return inits[name]
    from onnx import numpy_helper

    for n in graph.node:
        if n.op_type == "Constant" and name in n.output:
            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
    return None


def _dequantize(q: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, axis: int) -> np.ndarray:
    q64 = q.astype(np.float64)
    s, z = scale.astype(np.float64), (zp.astype(np.float64) if zp is not None else np.zeros_like(scale, np.float64))
    if s.ndim == 1 and s.size > 1:  # per-channel along ``axis``
        shape = [1] * q.ndim
        shape[axis % q.ndim] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return (q64 - z) * s


def map_qdq(float_model: Any, qdq_model: Any) -> QdqMap:
    """The quantized activations and the weights' errors (computed here, from the initializers) of ``qdq_model``."""
    g, fg = qdq_model.graph, float_model.graph
    inits, float_inits = _initializers(g), _initializers(fg)
    produced_by = {o: n for n in g.node for o in n.output}
    readers: dict[str, list[Any]] = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    float_nodes = {n.name: n for n in fg.node}
    out = QdqMap(producers={**{o: n.name for n in g.node for o in n.output if n.op_type != "QuantizeLinear"},
                            **{o: n.name for n in fg.node for o in n.output}})
    for dq in g.node:
        if dq.op_type != "DequantizeLinear":
            continue
        consumers = tuple(sorted({n.name for n in readers.get(dq.output[0], ())}))
        scale = _constant(g, inits, dq.input[1])
        zp = _constant(g, inits, dq.input[2]) if len(dq.input) > 2 and dq.input[2] else None
        if scale is None:
            continue
        source = dq.input[0]
        q = produced_by.get(source)
        if q is not None and q.op_type == "QuantizeLinear":
            seen = next((i for i, a in enumerate(out.activations) if a.tensor == q.input[0]), None)
            if seen is not None:  # one tensor, several DequantizeLinear nodes: one entry, every reader
                a = out.activations[seen]
                out.activations[seen] = dataclasses.replace(a, consumers=tuple(sorted({*a.consumers, *consumers})))
                continue
            out.activations.append(_Activation(q.input[0], dq.output[0], float(np.max(scale)),
                                               int(np.asarray(zp).ravel()[0]) if zp is not None else 0, consumers))
            continue
        if source not in inits:
            continue
        axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
        deq = _dequantize(inits[source], scale, zp, axis)
        original = _float_weight(float_nodes, readers.get(dq.output[0], ()), dq.output[0], float_inits)
        if original is None or original.shape != deq.shape:
            continue
        x = original.astype(np.float64)
        # saturated: the value rounds outside the INT8 grid (half a step beyond its ends)
        step = _dequantize(np.ones_like(inits[source]), scale, None, axis)
        lo = _dequantize(np.full_like(inits[source], -128), scale, zp, axis) - step / 2
        hi = _dequantize(np.full_like(inits[source], 127), scale, zp, axis) + step / 2
        clipped = int(np.count_nonzero((x < lo) | (x > hi)))
        signal, noise = float(np.sum(x * x)), float(np.sum((x - deq) ** 2))
        out.weights.append(TensorError(
            tensor=_float_weight_name(float_nodes, readers.get(dq.output[0], ()), dq.output[0]) or source,
            kind=WEIGHT, producer=None, consumers=consumers, sqnr_db=sqnr_db(signal, noise),
            rel_l2=math.sqrt(noise / signal) if signal > 0 else 0.0, clipped=clipped / max(x.size, 1),
            scale=float(np.max(scale))))
    return out


def _float_weight_name(float_nodes: Mapping[str, Any], readers: Iterable[Any], dequantized: str) -> str | None:
    """The float model's name of a weight: the same node, the same input position."""
    for reader in readers:
        original = float_nodes.get(reader.name)
        if original is None:
            continue
        for pos, name in enumerate(reader.input):
            if name == dequantized and pos < len(original.input):
                return str(original.input[pos])
    return None


def _float_weight(float_nodes: Mapping[str, Any], readers: Iterable[Any], dequantized: str,
                  float_inits: Mapping[str, np.ndarray]) -> np.ndarray | None:
    name = _float_weight_name(float_nodes, readers, dequantized)
    return float_inits.get(name) if name is not None else None


def _with_outputs(model: Any, names: Sequence[str]) -> bytes:
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    present = {o.name for o in m.graph.output}
    for name in names:
        if name not in present:
            m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
            present.add(name)
    return bytes(m.SerializeToString())


def _session(model: bytes, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def measure(float_path: Path, qdq_path: Path, batches: Iterable[Mapping[str, np.ndarray]], *,
            threads: int = 0) -> TensorErrors:
    """Stream ``batches`` through both models; the error of every quantized tensor, worst first.

    Only the tensors themselves are exposed (``T`` in both models): the dequantized value is computed here from
    ``T`` with the pair's scale and zero point (``QuantizeLinear`` rounds half to even and saturates, as
    :func:`numpy.rint` and :func:`numpy.clip` do), so a batch holds two copies of the activations, not three.
    ``threads``: ONNX Runtime's intra-op threads (0: its default, every core).
    """
    import onnx

    t0 = time.perf_counter()
    float_model, qdq_model = onnx.load(str(float_path)), onnx.load(str(qdq_path))
    qmap = map_qdq(float_model, qdq_model)
    float_tensors = _float_names(float_model)
    acts = [a for a in qmap.activations if a.tensor != a.dequantized]
    q_outputs = list(dict.fromkeys(a.tensor for a in acts))
    f_outputs = list(dict.fromkeys(a.tensor for a in acts if a.tensor in float_tensors))
    q_session = _session(_with_outputs(qdq_model, q_outputs), threads)
    f_session = _session(_with_outputs(float_model, f_outputs), threads)
    q_inputs = {i.name for i in q_session.get_inputs()}
    sums = {a.tensor: _Sums() for a in acts}
    samples = n_batches = 0
    for feeds in batches:
        feeds = {k: np.asarray(v) for k, v in feeds.items() if k in q_inputs}
        q_values = dict(zip(q_outputs, q_session.run(q_outputs, feeds), strict=True))
        f_values = dict(zip(f_outputs, f_session.run(f_outputs, feeds), strict=True)) if f_outputs else {}
        for a in acts:
            _accumulate(sums[a.tensor], a, q_values.pop(a.tensor), f_values.pop(a.tensor, None))
        samples += len(next(iter(feeds.values())))
        n_batches += 1
    errors = list(qmap.weights)
    for a in acts:
        s = sums[a.tensor]
        acc = a.tensor in float_tensors
        errors.append(TensorError(
            tensor=a.tensor, kind=ACTIVATION, producer=qmap.producers.get(a.tensor), consumers=a.consumers,
            sqnr_db=sqnr_db(s.signal, s.noise), rel_l2=math.sqrt(s.noise / s.signal) if s.signal > 0 else 0.0,
            clipped=s.clipped / max(s.count, 1), scale=a.scale,
            accumulated_sqnr_db=sqnr_db(s.acc_signal, s.acc_noise) if acc else None,
            accumulated_rel_l2=(math.sqrt(s.acc_noise / s.acc_signal) if s.acc_signal > 0 else 0.0) if acc else None))
    errors.sort(key=lambda t: (t.sqnr_db, t.tensor))
    from pytest_trt.calibration.ranges import op_types_to_calibrate

    ops = set(op_types_to_calibrate())
    quantizable = frozenset(n.name for n in float_model.graph.node if n.op_type in ops)
    return TensorErrors(tuple(errors), samples, n_batches, time.perf_counter() - t0, str(float_path), str(qdq_path),
                        quantizable)


def _float_names(model: Any) -> set[str]:
    g = model.graph
    return {i.name for i in g.input} | {o for n in g.node for o in n.output}


CHUNK = 4096


def _sumsq(v: np.ndarray) -> float:
    """sum(v * v) of a float32 array: products summed in float32 per chunk of 4096 values, chunks in float64."""
    flat = v.reshape(-1)
    head = flat.size - flat.size % CHUNK
    total = 0.0
    if head:
        rows = flat[:head].reshape(-1, CHUNK)
        total = float(np.einsum("ij,ij->i", rows, rows).sum(dtype=np.float64))
    tail = flat[head:].astype(np.float64)
    return total + float(np.dot(tail, tail))


def _accumulate(s: _Sums, a: _Activation, x: np.ndarray, f: np.ndarray | None) -> None:
    """Add one batch of tensor ``x`` (Q/DQ model) and ``f`` (float model) to the sums; two work buffers."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    scale = np.float32(a.scale)
    deq = np.divide(x, scale) if scale > 0 else np.zeros_like(x)
    np.rint(deq, out=deq)
    deq += np.float32(a.zero_point)
    lo, hi = np.float32(-128), np.float32(127)
    s.clipped += int(np.count_nonzero(deq < lo)) + int(np.count_nonzero(deq > hi))
    np.clip(deq, lo, hi, out=deq)
    deq -= np.float32(a.zero_point)
    deq *= scale
    s.count += x.size
    if f is not None and f.shape == x.shape:
        f = np.ascontiguousarray(f, dtype=np.float32)
        s.acc_signal += _sumsq(f)
        np.subtract(f, deq, out=f)
        s.acc_noise += _sumsq(f)
    s.signal += _sumsq(x)
    np.subtract(deq, x, out=deq)
    s.noise += _sumsq(deq)


def batches_of(inputs: Mapping[str, Any], samples: int, batch: int) -> Iterator[dict[str, np.ndarray]]:
    """Consecutive batches of ``inputs`` (arrays or HDF5 datasets, read one slice at a time)."""
    for start in range(0, samples, batch):
        yield {name: np.asarray(arr[start:start + batch]) for name, arr in inputs.items()}
