"""Shapes known only after folding, and control flow known at compile time.

Exporters compute sizes at run time (`Shape → Gather → Mod → Pad`), and
wrap code in `If`, `Loop` and sequence ops. ONNX shape inference does not
propagate values through most arithmetic, so such shapes stay unknown. Here
inference and folding run in turn until nothing changes (at most
`MAX_ROUNDS`), as onnx-simplifier and onnx-mlir do:

- a node whose inputs are all known (constants, or tensors of no elements)
  is evaluated (onnx.reference) and becomes a constant; so does
  `Shape`/`Size` of a statically shaped value;
- an `If` whose condition is known is replaced by its taken branch;
- a `Loop` with a known trip count (and a condition that is known or that
  the body passes through unchanged) is unrolled, its scan outputs joined;
  so is a `Scan` whose scan axis has a known length;
- sequences of known length become their tensors: `SequenceAt` an
  `Identity`, `SplitToSequence` a `Split`, `ConcatFromSequence` a `Concat`.

It works on the importer's copy of the graph without its large weights
(`onnx._without_large_weights`), so weight bytes are never read, and never
makes a constant of more than `FOLD_LIMIT` elements. Values inlined from a
subgraph are renamed `<node>/<name>` so that diagnostics still point at it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np
import onnx
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TypeProto, numpy_helper

from forge_opt.diagnostics import ForgeOptError
from forge_opt.dtypes import holds
from forge_opt.frontends.onnx_functions import expand, expandable, function_body
from forge_opt.frontends.onnx_graph import describe_node, node_label, node_reads, rename_reads, subgraphs
from forge_opt.transforms.fold_constants import FOLD_LIMIT

MAX_ROUNDS = 8

#: A Loop is unrolled only while the copies of its body stay below this.
MAX_UNROLLED_NODES = 20_000

#: Never evaluated: their value is not a function of their inputs, or they
#: have subgraphs (handled on their own below).
_KEEP = {
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial",
    "If", "Loop", "Scan", "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement",
}

_SEQUENCE_OPS = {
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
    "SequenceLength", "SplitToSequence", "ConcatFromSequence",
}


#: Ops whose presence alone sends a graph through resolution.
RESOLVED_OPS = frozenset({"If", "Loop", "Scan", *_SEQUENCE_OPS})


def _static(tp: TypeProto | None) -> bool:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return tp is not None  # sequences and optionals have no shape to fold
    tt = tp.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)


def _shape(tp: TypeProto | None) -> list[int] | None:
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not _static(tp):
        return None
    return [d.dim_value for d in tp.tensor_type.shape.dim]


def resolve(inferred: ModelProto, infer: Callable[[ModelProto], ModelProto]) -> ModelProto:
    """The graph with everything foldable folded and known control flow
    resolved, re-inferred after each round that changed something."""
    model = inferred
    for _ in range(MAX_ROUNDS):
        folded = _Round(model)
        if not folded.run():
            break
        model = infer(folded.model())
    return model


class _Round:
    """One in-order walk over the graph; inlined nodes are walked where they land."""

    def __init__(self, model: ModelProto):
        self.source = model
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.types: dict[str, TypeProto] = {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}
        self.known: dict[str, np.ndarray] = {}
        for t in g.initializer:
            self.known[t.name] = numpy_helper.to_array(t)
            self.types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
        self.made: dict[str, np.ndarray] = {}  # constants this round made
        self.seqs: dict[str, list[str]] = {}  # sequences resolved to their tensors
        self.built: set[str] = set()  # resolved sequences a kept node still reads as a sequence
        self.nodes: list[NodeProto] = []
        self._axes: dict[int, str] = {}  # one `axes` constant per axis
        self.changed = False
        self._fresh = 0

    def run(self) -> bool:
        work = deque(self.source.graph.node)
        while work:
            node = work.popleft()
            replacement = self._visit(node)
            if replacement is None:
                self._keep(node)
            else:
                self.changed = True
                work.extendleft(reversed(replacement))
        return self.changed

    def model(self) -> ModelProto:
        src = self.source
        out = ModelProto()
        out.ir_version = src.ir_version
        out.opset_import.extend(src.opset_import)
        out.functions.extend(src.functions)
        g = out.graph
        g.name = src.graph.name
        g.input.extend(src.graph.input)
        for o in src.graph.output:
            if o.name in self.seqs and o.name not in self.built:
                self._build_sequence(o.name)
        g.output.extend(src.graph.output)
        g.node.extend(self.nodes)
        read = {n for node in self.nodes for n in node_reads(node)} | {o.name for o in src.graph.output}
        g.initializer.extend(t for t in src.graph.initializer if t.name in read)
        g.initializer.extend(numpy_helper.from_array(v, name) for name, v in self.made.items() if name in read)
        return out

    # -- the walk

    def _keep(self, node: NodeProto) -> None:
        for name in node_reads(node):
            if name in self.seqs and name not in self.built:
                self._build_sequence(name)
        self.nodes.append(node)

    def _build_sequence(self, name: str) -> None:
        """A resolved sequence that something still reads as a sequence."""
        self.built.add(name)
        items = self.seqs[name]
        if items:
            self.nodes.append(onnx.helper.make_node("SequenceConstruct", items, [name], name=f"{name}/construct"))
        else:
            self.nodes.append(onnx.helper.make_node("SequenceEmpty", [], [name], name=f"{name}/empty"))

    def _visit(self, node: NodeProto) -> list[NodeProto] | None:
        """Nodes replacing `node` (walked next), [] when it folded away, or
        None to keep it."""
        if node.domain not in ("", "ai.onnx"):
            return None
        op = node.op_type
        if op == "If":
            return self._if(node)
        if op == "Loop":
            return self._loop(node)
        if op == "Scan" and self.opset >= 9:  # (opset 8's batched form is left alone)
            return self._scan(node)
        if op in _SEQUENCE_OPS or (op == "Identity" and node.input[0] in self.seqs):
            return self._sequence(node)
        if expandable(op, self.opset):
            types = [self.types.get(name) if name else None for name in node.input]
            body = function_body(node, types, self.opset)
            return None if body is None else expand(node, body, self.opset)
        if op in _KEEP or any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            return None
        if op in ("Shape", "Size"):
            shape = _shape(self.types.get(node.input[0]))
            if shape is None:
                return None
            value = _shape_slice(node, shape) if op == "Shape" else np.array(math.prod(shape), np.int64)
            return self._fold(node, [value])
        if op == "CastLike" and node.input[0] in self.known:  # needs only the type of its second input
            target = self.types.get(node.input[1])
            if target is not None and target.WhichOneof("value") == "tensor_type" and target.tensor_type.elem_type:
                dtype = onnx.helper.tensor_dtype_to_np_dtype(target.tensor_type.elem_type)
                if holds(np.dtype(dtype)):
                    return self._fold(node, [self.known[node.input[0]].astype(dtype)])
        for name in node.input:  # a tensor of no elements is known from its type alone
            if name and name not in self.known:
                shape = _shape(self.types.get(name))
                elem = self.types[name].tensor_type.elem_type if shape is not None else 0
                if shape is None or 0 not in shape or not elem:
                    return None
                self.known[name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))
        if not self._small_enough(node):
            return None
        values = self._evaluate(node, [self.known[n] if n else None for n in node.input])
        return None if values is None else self._fold(node, values)

    def _evaluate(self, node: NodeProto, inputs: list) -> list[np.ndarray] | None:
        from forge_opt.interpreters.onnx import evaluate_node

        try:
            outs = evaluate_node(node, inputs, self.opset)
        except Exception:  # not evaluable here: the lowering reports what is wrong with it
            return None
        if any(not isinstance(o, np.ndarray) or o.size > FOLD_LIMIT or not holds(o.dtype) for o in outs):
            return None  # too large, or strings, which the importer cannot hold
        return outs

    def _small_enough(self, node: NodeProto) -> bool:
        """Ops whose output grows with an input's values: checked before they run."""
        op, known = node.op_type, self.known
        try:
            if op == "ConstantOfShape":
                return math.prod(int(d) for d in known[node.input[0]].reshape(-1)) <= FOLD_LIMIT
            if op == "Expand":
                shape = np.broadcast_shapes(known[node.input[0]].shape, tuple(known[node.input[1]].reshape(-1)))
                return math.prod(shape) <= FOLD_LIMIT
            if op == "Tile":
                return known[node.input[0]].size * math.prod(int(r) for r in known[node.input[1]]) <= FOLD_LIMIT
            if op == "Range":
                start, limit, delta = (float(known[n]) for n in node.input[:3])
                return delta != 0 and max(0.0, math.ceil((limit - start) / delta)) <= FOLD_LIMIT
        except (ValueError, TypeError, OverflowError):
            return False
        return True

    def _fold(self, node: NodeProto, values: list[np.ndarray]) -> list[NodeProto]:
        for name, value in zip(node.output, values):
            if name:
                self._set(name, np.asarray(value))
        return []

    def _set(self, name: str, value: np.ndarray) -> None:
        self.known[name] = self.made[name] = value
        elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        self.types[name] = onnx.helper.make_tensor_type_proto(elem, list(value.shape))

    def _unique(self, base: str) -> str:
        self._fresh += 1
        return f"{base}#{self._fresh}"

    def _constant(self, base: str, value: np.ndarray) -> str:
        name = self._unique(base)
        self._set(name, value)
        return name

    # -- control flow

    def _if(self, node: NodeProto) -> list[NodeProto] | None:
        cond = self.known.get(node.input[0])
        if cond is None:
            return None
        branch = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
        graph = next(a.g for a in node.attribute if a.name == branch)
        nodes, outs = self._inline(graph, f"{node_label(node)}/{branch.split('_')[0]}", {})
        for out, inner in zip(node.output, outs):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [inner], [out], name=f"{node_label(node)}/{out}"))
        return nodes

    def _loop(self, node: NodeProto) -> list[NodeProto] | None:
        trip_name = node.input[0] if node.input else ""
        cond_name = node.input[1] if len(node.input) > 1 else ""
        if not trip_name or trip_name not in self.known:
            return None  # a while loop: its length is data
        trips = int(np.asarray(self.known[trip_name]).reshape(-1)[0])
        body = next(a.g for a in node.attribute if a.name == "body")
        if cond_name:
            if cond_name not in self.known:
                return None
            if not bool(np.asarray(self.known[cond_name]).reshape(-1)[0]):
                trips = 0
            elif not _passes_condition_through(body, self.known):
                return None  # the body may stop early on computed values
        carried = list(node.input[2:])
        n_scans = len(body.output) - 1 - len(carried)
        if trips == 0 and n_scans:
            return None  # empty scan outputs of a shape only a run would give
        self._check_unrolled(node, trips, body)
        label = node_label(node)
        nodes: list[NodeProto] = []
        scans: list[list[str]] = [[] for _ in range(n_scans)]
        cond_value = cond_name or self._constant(f"{label}/cond", np.array(True))
        for i in range(trips):
            bind = {body.input[0].name: self._constant(f"{label}/{i}/iteration", np.array(i, np.int64))}
            if len(body.input) > 1:
                bind[body.input[1].name] = cond_value
            for inner, value in zip(body.input[2:], carried):
                bind[inner.name] = value
            inlined, outs = self._inline(body, f"{label}/{i}", bind)
            nodes += inlined
            carried = outs[1 : 1 + len(carried)]
            for k, scan in enumerate(outs[1 + len(carried) :]):
                scans[k].append(scan)
        results = list(node.output)
        for out, value in zip(results, carried):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [value], [out], name=f"{label}/{out}"))
        for out, values in zip(results[len(carried) :], scans):
            if out:
                parts = [self._unsqueeze(v, 0, nodes, label) for v in values]
                nodes.append(onnx.helper.make_node("Concat", parts, [out], axis=0, name=f"{label}/{out}"))
        return nodes

    def _scan(self, node: NodeProto) -> list[NodeProto] | None:
        """Unrolled along the scan axis, whose length the inputs' types give:
        each step reads slices of the scan inputs (Gather at the step),
        threads the state and adds to the scan outputs (joined on their axes)."""
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        body: GraphProto = attrs["body"]
        m = int(attrs["num_scan_inputs"])
        n = len(node.input) - m
        k = len(body.output) - n
        in_axes = list(attrs.get("scan_input_axes", [0] * m))
        in_reverse = list(attrs.get("scan_input_directions", [0] * m))
        out_axes = list(attrs.get("scan_output_axes", [0] * k))
        out_reverse = list(attrs.get("scan_output_directions", [0] * k))
        shapes = [_shape(self.types.get(name)) for name in node.input[n:]]
        if any(s is None for s in shapes):
            return None
        lengths = {s[a % len(s)] for s, a in zip(shapes, in_axes) if s is not None}
        if len(lengths) != 1:
            return None
        steps = lengths.pop()
        if steps == 0 and k:
            return None
        label = node_label(node)
        self._check_unrolled(node, steps, body)
        nodes: list[NodeProto] = []
        states = list(node.input[:n])
        outs: list[list[str]] = [[] for _ in range(k)]
        for t in range(steps):
            bind = dict(zip((i.name for i in body.input[:n]), states))
            for j, (inner, outer) in enumerate(zip(body.input[n:], node.input[n:])):
                at = self._constant(f"{label}/{t}/at", np.array(steps - 1 - t if in_reverse[j] else t, np.int64))
                piece = f"{label}/{t}/{inner.name}"
                nodes.append(onnx.helper.make_node("Gather", [outer, at], [piece], axis=in_axes[j], name=piece))
                bind[inner.name] = piece
            inlined, results = self._inline(body, f"{label}/{t}", bind)
            nodes += inlined
            states = results[:n]
            for j, value in enumerate(results[n:]):
                outs[j].append(value)
        for out, value in zip(node.output, states):
            if out:
                nodes.append(onnx.helper.make_node("Identity", [value], [out], name=f"{label}/{out}"))
        for j, (out, values) in enumerate(zip(node.output[n:], outs)):
            if out:
                ordered = values[::-1] if out_reverse[j] else values
                parts = [self._unsqueeze(v, out_axes[j], nodes, label) for v in ordered]
                nodes.append(onnx.helper.make_node("Concat", parts, [out], axis=out_axes[j], name=f"{label}/{out}"))
        return nodes

    def _check_unrolled(self, node: NodeProto, steps: int, body: GraphProto) -> None:
        if steps * max(len(body.node), 1) > MAX_UNROLLED_NODES:
            raise ForgeOptError(
                f"{describe_node(node)}: unrolling {steps} iterations of a {len(body.node)}-node body makes "
                f"{steps * len(body.node):,} nodes, more than the limit of {MAX_UNROLLED_NODES:,}"
            )

    def _inline(self, graph: GraphProto, prefix: str, bind: dict[str, str]) -> tuple[list[NodeProto], list[str]]:
        """The subgraph's nodes with its own values renamed under `prefix`
        and its inputs bound to outer values; the names of its outputs."""
        rename = dict(bind)
        for t in graph.initializer:
            rename[t.name] = self._constant(f"{prefix}/{t.name}", numpy_helper.to_array(t))
        nodes = []
        for inner in graph.node:
            copy = NodeProto()
            copy.CopyFrom(inner)
            copy.name = f"{prefix}/{node_label(inner)}"
            copy.input[:] = [rename.get(n, n) for n in inner.input]
            for sub in subgraphs(copy) if copy.attribute else ():
                rename_reads(sub, rename)
            for i, out in enumerate(inner.output):
                if out:
                    rename[out] = copy.output[i] = f"{prefix}/{out}"
            nodes.append(copy)
        return nodes, [rename.get(o.name, o.name) for o in graph.output]

    # -- sequences

    def _sequence(self, node: NodeProto) -> list[NodeProto] | None:
        op, seqs, out = node.op_type, self.seqs, node.output[0]
        ins = list(node.input)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op == "SequenceEmpty":
            seqs[out] = []
            return []
        if op == "SequenceConstruct":
            seqs[out] = ins
            return []
        if op == "SplitToSequence":
            return self._split_to_sequence(node, attrs)
        if not ins or ins[0] not in seqs:
            return None
        items = seqs[ins[0]]
        if op == "Identity":
            seqs[out] = items
            return []
        if op == "SequenceLength":
            return self._fold(node, [np.array(len(items), np.int64)])
        if op == "ConcatFromSequence":
            if not items:
                return None
            axis = int(attrs.get("axis", 0))
            nodes: list[NodeProto] = []
            parts = items
            if attrs.get("new_axis"):
                parts = [self._unsqueeze(v, axis, nodes, node_label(node)) for v in items]
            nodes.append(onnx.helper.make_node("Concat", parts, [out], axis=axis, name=node_label(node)))
            return nodes
        # positions count from the back when negative: [-n, n] to insert, [-n, n - 1] otherwise
        inserting = op == "SequenceInsert"
        given = ins[2] if inserting and len(ins) > 2 else ins[1] if not inserting and len(ins) > 1 else ""
        position = self._position(given)
        if position is False:
            return None
        n = len(items)
        last = n if inserting else n - 1
        at = last if position is None else position + n if position < 0 else position
        if not 0 <= at <= last:
            return None  # out of range: left for onnx-to-tir, which names the node
        if inserting:
            seqs[out] = [*items[:at], ins[1], *items[at:]]
            return []
        if op == "SequenceErase":
            seqs[out] = items[:at] + items[at + 1 :]
            return []
        if op == "SequenceAt" and position is not None:
            return [onnx.helper.make_node("Identity", [items[at]], [out], name=node_label(node))]
        return None

    def _position(self, name: str) -> int | bool | None:
        """A known position input's value, None when omitted, False when unknown."""
        if not name:
            return None
        if name not in self.known:
            return False
        return int(np.asarray(self.known[name]).reshape(-1)[0])

    def _split_to_sequence(self, node: NodeProto, attrs: dict) -> list[NodeProto] | None:
        shape = _shape(self.types.get(node.input[0]))
        split = node.input[1] if len(node.input) > 1 and node.input[1] else ""
        if shape is None or (split and split not in self.known):
            return None
        axis = int(attrs.get("axis", 0)) % len(shape)
        size = shape[axis]
        if not split:
            sizes = [1] * size
        else:
            given = np.asarray(self.known[split])
            if given.ndim == 0:
                step = int(given)
                if step <= 0:
                    return None
                sizes = [min(step, size - start) for start in range(0, size, step)]
            else:
                sizes = [int(s) for s in given]
                if sum(sizes) != size:
                    return None
        label = node_label(node)
        pieces = [f"{label}/{i}" for i in range(len(sizes))]
        if self.opset >= 13:  # one Split (tir.split), its sizes an input since opset 13
            given = self._constant(f"{label}/sizes", np.array(sizes, np.int64))
            nodes = [onnx.helper.make_node("Split", [node.input[0], given], pieces, axis=axis, name=label)]
        else:
            nodes = [onnx.helper.make_node("Split", [node.input[0]], pieces, axis=axis, split=sizes, name=label)]
        items = pieces
        if not split and attrs.get("keepdims", 1) == 0:
            items = [self._squeeze(piece, axis, nodes, label) for piece in pieces]
        self.seqs[node.output[0]] = items
        return nodes

    # -- Squeeze/Unsqueeze in the model's opset (axes became an input at 13)

    def _unsqueeze(self, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        return self._axes_op("Unsqueeze", value, axis, nodes, label)

    def _squeeze(self, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        return self._axes_op("Squeeze", value, axis, nodes, label)

    def _axes_op(self, op: str, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        out = self._unique(f"{value}/{op.lower()}")
        if self.opset >= 13:
            axes = self._axes.get(axis)
            if axes is None:
                axes = self._axes[axis] = self._constant(f"{label}/axes", np.array([axis], np.int64))
            nodes.append(onnx.helper.make_node(op, [value, axes], [out], name=out))
        else:
            nodes.append(onnx.helper.make_node(op, [value], [out], axes=[axis], name=out))
        return out


def _shape_slice(node: NodeProto, shape: list[int]) -> np.ndarray:
    """`Shape`'s output with its `start`/`end` attributes (opset 15)."""
    attrs = {a.name: a.i for a in node.attribute}
    rank = len(shape)
    start = attrs.get("start", 0)
    end = attrs.get("end", rank)
    return np.array(shape[slice(start, end)], np.int64)


def _passes_condition_through(body: GraphProto, known: dict[str, np.ndarray]) -> bool:
    """Whether the body's condition output is its condition input or a true
    constant (of the body, or a known outer value), directly or through
    Identity: then only the trip count ends the loop."""
    if len(body.input) < 2:
        return False
    cond_in = body.input[1].name
    name = body.output[0].name
    producers = {o: n for n in body.node for o in n.output}
    initializers = {t.name: t for t in body.initializer}
    while name != cond_in:
        node = producers.get(name)
        if node is not None and node.op_type == "Identity":
            name = node.input[0]
            continue
        if node is not None and node.op_type == "Constant" and node.attribute[0].type == AttributeProto.TENSOR:
            value = numpy_helper.to_array(node.attribute[0].t)
        elif name in initializers:
            value = numpy_helper.to_array(initializers[name])
        elif node is None and name in known:
            value = known[name]
        else:
            return False
        return bool(np.asarray(value).reshape(-1)[0])
    return True
