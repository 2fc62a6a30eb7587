"""Which original ONNX nodes each node of ONNX Runtime's optimized graph implements.

Origins come from the optimized graph's structure, in this order of trust:

1. tensors that keep their original name (graph inputs and outputs, tensors
   between unfused nodes, the outputs of NCHWc ``ReorderOutput``);
2. node names ONNX Runtime derives from the node it rewrote: the same name
   (``_token_<n>`` appended for uniqueness), ``<output tensor>_nchwc`` for the
   NCHWc transformer, ``<node>/<Pass>Fusion/`` for pattern fusions such as
   QuickGelu; such a name gives the tensor *before* the node's fused extras, so
3. what the node carries moves it forward: an ``activation`` attribute (NCHWc
   Conv, FusedConv, FusedGemm) takes in the original activation that consumes
   it, a Conv's 4th ("Sum") input the Add after it, a QLinear op the
   QuantizeLinear after it;
4. position: an input of a mapped node at index k holds its original node's
   input k (ONNX Runtime keeps input order when it rewrites an op), which maps
   the outputs of nodes whose names say nothing.

A layer's origins are then the original nodes between the tensor it produces
and the tensors that still exist.  A layer whose walk stops at a tensor that
is not one of its own inputs claims work it cannot have done (or misses work
it did): :func:`pytest_trt.buildlog.ort_record.record_from_models` lists it as uncertain rather than silently
keeping it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import onnx

#: ops whose arithmetic runs on 8-bit integers (their outputs may be float, e.g. DynamicQuantizeMatMul)
QUANTIZED_OPS = frozenset(
    {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
     "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
     "QLinearConcat", "QLinearSoftmax", "QGemm", "QLinearWhere", "QLinearReduceMean"}
)

#: ONNX Runtime's own layout conversions, per domain: identities as far as origins are concerned
LAYOUT_OPS: dict[str, tuple[str, ...]] = {
    "com.microsoft.nchwc": ("ReorderInput", "ReorderOutput"),
    "": ("Transpose",),  # inserted by the NHWC layout transformer; a model's own Transpose keeps its name
}
# ORT makes generated node names unique by appending "_token_<n>" (graph.cc GenerateNodeName)
_TOKEN_SUFFIX = re.compile(r"_token_\d+$")
_INLINED = "_inlfunc_"  # tensors inside a function op ONNX Runtime inlined: "_inlfunc_<Op>_<name>"
#: Reshapes MatMulAddFusion puts around a Gemm for inputs of rank > 2: identities for origins
_GEMM_RESHAPES = ("gemm_input_reshape", "gemm_output_reshape")
_NCHWC_SUFFIX = "_nchwc"  # NchwcTransformer names its nodes "<output tensor>_nchwc"
# pattern fusions name their node "<first matched node>/<FusionName>/" (e.g. ".../Mul/QuickGeluFusion/")
_FUSION_SUFFIX = re.compile(r"/(?P<pass>[A-Za-z0-9]+Fusion[A-Za-z0-9]*)/?$")
#: attribute "activation" of a fused node -> the original op types it absorbed
FUSED_ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "Relu": ("Relu",),
    "Clip": ("Clip",),
    "Sigmoid": ("Sigmoid",),
    "Tanh": ("Tanh",),
    "LeakyRelu": ("LeakyRelu",),
    "HardSigmoid": ("HardSigmoid",),
    "HardSwish": ("HardSwish",),
}


@dataclass
class GraphIndex:
    """Lookup tables over one graph: producers, consumers, node names, constants."""

    model: onnx.ModelProto
    nodes: list[onnx.NodeProto] = field(init=False)
    producer: dict[str, int] = field(init=False)
    consumers: dict[str, list[int]] = field(init=False)
    by_name: dict[str, int] = field(init=False)
    constants: set[str] = field(init=False)
    graph_inputs: set[str] = field(init=False)

    def __post_init__(self) -> None:
        g = self.model.graph
        self.nodes = list(g.node)
        self.producer, self.consumers, self.by_name = {}, {}, {}
        for i, n in enumerate(self.nodes):
            self.by_name.setdefault(n.name, i)
            for t in n.output:
                if t:
                    self.producer[t] = i
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(i)
        self.constants = {t.name for t in g.initializer}
        self.graph_inputs = {v.name for v in g.input} - self.constants

    def has_node(self, name: str) -> bool:
        return bool(name) and name in self.by_name

    def is_activation(self, tensor: str) -> bool:
        """A computed or fed tensor (not an initializer)."""
        return tensor in self.producer or tensor in self.graph_inputs

    def tensor_types(self) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
        """Element types and shapes known from the model and ONNX shape inference (-1: unknown dim)."""
        try:
            model = onnx.shape_inference.infer_shapes(self.model, strict_mode=False)
        except Exception:  # noqa: BLE001 - inference is best effort; custom domains may defeat it
            model = self.model
        types: dict[str, int] = {t.name: t.data_type for t in model.graph.initializer}
        shapes: dict[str, tuple[int, ...]] = {t.name: tuple(t.dims) for t in model.graph.initializer}
        g = model.graph
        for v in [*g.input, *g.output, *g.value_info]:
            tt = v.type.tensor_type
            if tt.elem_type:
                types.setdefault(v.name, tt.elem_type)
            if tt.HasField("shape"):
                shapes.setdefault(v.name, tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim))
        return types, shapes


def _propagate_types(opt: GraphIndex, types: dict[str, int]) -> None:
    """Fill types shape inference could not give (contrib ops), by the op's type rule."""
    for node in opt.nodes:  # saved models are topologically sorted
        for k, out in enumerate(node.output):
            if not out or out in types:
                continue
            ins = list(node.input)
            if node.op_type == "QuantizeLinear":
                elem = types.get(ins[2]) if len(ins) > 2 and ins[2] else onnx.TensorProto.UINT8
            elif node.op_type == "DequantizeLinear":
                elem = types.get(ins[1]) if len(ins) > 1 else None
            elif node.op_type == "Cast":
                elem = next((a.i for a in node.attribute if a.name == "to"), None)
            elif node.op_type in ("Shape", "Size"):
                elem = onnx.TensorProto.INT64
            elif node.op_type.startswith("QLinear") or node.op_type == "QGemm":
                # output zero point is the last input of every QLinear* op
                elem = types.get(ins[-1]) if ins and ins[-1] else None
            else:
                elem = types.get(ins[0]) if ins and ins[0] else None
            if elem and k == 0:
                types[out] = elem


def resolve_aliases(
    orig: GraphIndex, opt: GraphIndex
) -> tuple[dict[str, str], dict[str, int], dict[str, tuple[int, ...]], bool]:
    """Map optimized-graph tensors to the original tensors they hold.

    Returns (alias, types, shapes, exact): ``alias`` maps optimized tensor ->
    original tensor, ``types``/``shapes`` are per optimized tensor, ``exact``
    is False when some compute node's outputs could not be mapped (its work is
    then attributed to the layer consuming them).
    """
    alias: dict[str, str] = {}
    names = {t for n in opt.nodes for t in [*n.input, *n.output] if t} | opt.graph_inputs
    for t in names:
        if orig.is_activation(t) and t not in opt.constants:
            alias[t] = t
    orig_types, _ = orig.tensor_types()
    types, shapes = opt.tensor_types()
    for t in alias:
        if t in orig_types:
            types.setdefault(t, orig_types[t])
    _propagate_types(opt, types)

    taken = set(alias.values())

    def claim(tensor: str, target: str | None) -> bool:
        # an original tensor that still exists (or is already claimed) is not re-assigned
        if tensor in alias or not target or target in taken:
            return False
        alias[tensor] = target
        taken.add(target)
        return True

    changed = True
    while changed:
        changed = False
        for node in opt.nodes:
            if is_layout(orig, node):
                if node.input and node.output:
                    src, dst = node.input[0], node.output[0]
                    if src in alias and dst not in alias:
                        alias[dst] = alias[src]
                        changed = True
                    elif dst in alias and src not in alias:
                        alias[src] = alias[dst]
                        changed = True
                continue
            named = named_outputs(orig, node)
            for k, out in enumerate(node.output):
                if k < len(named) and named[k]:
                    changed |= claim(out, extended_target(orig, node, named[k]) if k == 0 else named[k])
            changed |= _claim_inputs_by_position(orig, opt, node, alias, claim)
    exact = all(any(t in alias for t in n.output) for n in opt.nodes if not is_layout(orig, n))
    return alias, types, shapes, exact


def named_outputs(orig: GraphIndex, node: onnx.NodeProto) -> list[str]:
    """The original tensors the node's name points at (before its fused extras); [] when it says nothing."""
    base = _TOKEN_SUFFIX.sub("", node.name)
    # fusions of fusions stack their suffixes: ".../MatMul_1/MatMulScaleFusion//MatmulTransposeFusion/"
    while (fused := _FUSION_SUFFIX.search(base)) is not None:
        base = base[: fused.start()]
    if orig.has_node(base):
        return [str(t) for t in orig.nodes[orig.by_name[base]].output]
    if base.endswith(_NCHWC_SUFFIX):
        target = base[: -len(_NCHWC_SUFFIX)]
        if orig.is_activation(target):
            return [target]
    return []


def fusion_pass(node: onnx.NodeProto) -> str | None:
    """The pass named in a pattern fusion's node name (``.../QuickGeluFusion/``), if any."""
    m = _FUSION_SUFFIX.search(_TOKEN_SUFFIX.sub("", node.name))  # the outermost (last) pass
    return m["pass"] if m else None


def extended_target(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """``target`` moved past what the node absorbed after its named op: a Sum input, an activation, a Q, a bias."""
    target = _summed(orig, node, _requantized(orig, node, target))
    return _activated(orig, node, _biased(orig, node, target))


def _biased(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A Gemm that replaced MatMul + Add (MatMulAddFusion) outputs the Add's tensor."""
    producer = orig.producer.get(target)
    if node.op_type != "Gemm" or producer is None or orig.nodes[producer].op_type != "MatMul":
        return target
    user = _single_user(orig, target)
    if user is not None and user.op_type == "Add" and user.output:
        return str(user.output[0])
    return target


def inlined_function_owner(
    orig: GraphIndex, opt: GraphIndex, node: onnx.NodeProto, alias: dict[str, str]
) -> str | None:
    """The original node a part of an inlined function (``_inlfunc_<Op>_...`` outputs) belongs to.

    ONNX Runtime inlines function ops (HardSwish -> HardSigmoid + Mul): the nodes it made
    share their original node, found as the original producer of what their consumer computes.
    """
    outs = [t for t in node.output if t]
    if not outs or not all(t.startswith(_INLINED) for t in outs):
        return None
    op = outs[0][len(_INLINED) :].split("_", 1)[0]
    for user in opt.consumers.get(outs[0], []):
        for t in opt.nodes[user].output:
            producer = orig.producer.get(alias.get(t, ""))
            if producer is not None and orig.nodes[producer].op_type == op:
                return orig.nodes[producer].name or None
    return None


def _single_user(orig: GraphIndex, tensor: str) -> onnx.NodeProto | None:
    users = orig.consumers.get(tensor, [])
    return orig.nodes[users[0]] if len(users) == 1 else None


def _activated(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A node with an ``activation`` attribute computes that activation's output, not its own op's."""
    act = next((a.s.decode() for a in node.attribute if a.name == "activation" and a.s), None)
    if act is None:
        return target
    wanted = FUSED_ACTIVATIONS.get(act, (act,))
    producer = orig.producer.get(target)
    if producer is not None and orig.nodes[producer].op_type in wanted:
        return target  # the name already is the activation's output
    user = _single_user(orig, target)
    if user is not None and user.op_type in wanted and user.output:
        return str(user.output[0])
    return target


#: optimized op -> the original op whose inputs it keeps, in the same order
_SAME_INPUTS = {"FusedConv": "Conv", "FusedGemm": "Gemm"}


def _named_original(orig: GraphIndex, node: onnx.NodeProto, alias: dict[str, str]) -> onnx.NodeProto | None:
    """The original node of the same op type that this node rewrote, walking back over its fused extras."""
    if node.op_type in QUANTIZED_OPS:
        return None  # QLinear ops interleave scales and zero points with the data inputs
    op_type = _SAME_INPUTS.get(node.op_type, node.op_type)
    out = next((alias[t] for t in node.output if t in alias), None)
    steps = 0
    while out is not None and steps < 4:
        index = orig.producer.get(out)
        if index is None:
            return None
        candidate = orig.nodes[index]
        if candidate.op_type == op_type:
            return candidate
        data = [t for t in candidate.input if t and orig.is_activation(t)]
        out = data[0] if data else None
        steps += 1
    return None


def _claim_inputs_by_position(
    orig: GraphIndex,
    opt: GraphIndex,
    node: onnx.NodeProto,
    alias: dict[str, str],
    claim: Callable[[str, str | None], bool],
) -> bool:
    """Input k of a mapped node holds input k of its original node (same op type, same input order).

    Only computed tensors: a weight ONNX Runtime folded or re-laid out is a new constant, not an alias.
    """
    if not any(t not in alias and opt.is_activation(t) for t in node.input if t):
        return False
    original = _named_original(orig, node, alias)
    if original is None:
        return False
    changed = False
    for k, tensor in enumerate(node.input):
        if tensor and tensor not in alias and opt.is_activation(tensor) and k < len(original.input):
            source = original.input[k]
            if source and source in orig.producer:
                changed |= claim(tensor, source)
    return changed


def is_layout(orig: GraphIndex, node: onnx.NodeProto) -> bool:
    """A layout conversion ONNX Runtime inserted (a model's own Transpose keeps its original name)."""
    if orig.has_node(node.name):
        return False
    if node.op_type == "Reshape" and node.domain in ("", "ai.onnx"):
        return _TOKEN_SUFFIX.sub("", node.name) in _GEMM_RESHAPES
    return node.op_type in LAYOUT_OPS.get(node.domain, ())


def _requantized(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A QLinear* op that replaced DQ -> op -> Q outputs the Q's tensor, not the op's float one."""
    users = orig.consumers.get(target, [])
    if node.op_type in QUANTIZED_OPS and len(users) == 1 and orig.nodes[users[0]].op_type == "QuantizeLinear":
        return str(orig.nodes[users[0]].output[0])
    return target


def _summed(orig: GraphIndex, node: onnx.NodeProto, target: str) -> str:
    """A Conv with a 4th ("Sum"/"Z") input has absorbed the Add after it: its output is the Add's."""
    if node.op_type not in ("Conv", "FusedConv") or len(node.input) < 4 or not node.input[3]:
        return target
    users = orig.consumers.get(target, [])
    if len(users) == 1 and orig.nodes[users[0]].op_type in ("Add", "Sum"):
        return str(orig.nodes[users[0]].output[0])
    return target




def origins_of(index: GraphIndex, produced: Sequence[str], materialized: set[str]) -> tuple[tuple[str, ...], set[str]]:
    """Original nodes between ``produced`` and the tensors that still exist, in original graph order.

    Also returns the frontier: the materialized (or fed) tensors the walk stopped at.
    """
    found: set[int] = set()
    stack = [t for t in produced if t in index.producer]
    seen: set[str] = set()
    frontier: set[str] = set()
    while stack:
        tensor = stack.pop()
        if tensor in seen:
            continue
        seen.add(tensor)
        node = index.producer.get(tensor)
        if node is None or node in found:
            continue
        found.add(node)
        for name in index.nodes[node].input:
            if not name:
                continue
            if name not in materialized and name in index.producer:
                stack.append(name)
            elif index.is_activation(name):
                frontier.add(name)
    names = tuple(index.nodes[i].name or f"{index.nodes[i].op_type}_{i}" for i in sorted(found))
    return names, frontier
