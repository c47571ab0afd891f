"""Shapes known only after folding, and control flow known at compile time.

Exporters compute sizes at run time (`Shape → Gather → Mod → Pad`), and
wrap code in `If`, `Loop` and sequence ops. ONNX shape inference does not
propagate values through most arithmetic, so such shapes stay unknown. Here
inference and folding run in turn until nothing changes (at most
`MAX_ROUNDS`), as onnx-simplifier and onnx-mlir do:

- a node whose inputs are all known (constants, or tensors of no elements)
  is evaluated (onnx.reference) and becomes a constant; so does
  `Shape`/`Size` of a statically shaped value;
- an `If`, `Loop` or `Scan` known at compile time is replaced by its taken
  branch or unrolled (`unroll`);
- sequences of known length become their tensors (`sequences`).

It works on the importer's copy of the graph without its large weights
(`onnx._without_large_weights`), so weight bytes are never read, and never
makes a constant of more than `FOLD_LIMIT` elements.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np
import onnx
import onnx.defs
import onnx.shape_inference
from onnx import AttributeProto, ModelProto, NodeProto, numpy_helper

from forge_opt.dtypes import holds
from forge_opt.frontends.onnx.dispatch import FixedSizeDispatch
from forge_opt.frontends.onnx.functions import expand, expandable, function_body
from forge_opt.frontends.onnx.graph import node_reads
from forge_opt.frontends.onnx.masked_scatter import FixedSizeMaskedScatter
from forge_opt.frontends.onnx.round import is_static, static_shape
from forge_opt.frontends.onnx.sequences import SEQUENCE_OPS, ResolveSequences
from forge_opt.frontends.onnx.unroll import UnrollControlFlow
from forge_opt.interpreters.onnx import FOLD_LIMIT, evaluate_node

MAX_ROUNDS = 8
#: the largest int64 value given to one node's inference as data (shapes, pads, axes)
_SHAPE_DATA = 64

#: Never evaluated: their value is not a function of their inputs, or they
#: have subgraphs (handled on their own below).
_KEEP = {
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial",
    "If", "Loop", "Scan", "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement",
}

#: Ops whose presence alone sends a graph through resolution.
RESOLVED_OPS = frozenset({"If", "Loop", "Scan", *SEQUENCE_OPS})


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


class _Round(UnrollControlFlow, ResolveSequences, FixedSizeDispatch, FixedSizeMaskedScatter):
    """One in-order walk over the graph; inlined nodes are walked where they
    land. Control flow (`unroll`) and sequences (`sequences`) are
    resolved by the families' own steps, as are an expert's dispatch
    (`dispatch`) and a masked_scatter (`masked_scatter`)."""

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
        g.node.extend(self._live(self.nodes, {o.name for o in src.graph.output}))
        read = {n for node in g.node for n in node_reads(node)} | {o.name for o in src.graph.output}
        g.initializer.extend(t for t in src.graph.initializer if t.name in read)
        g.initializer.extend(numpy_helper.from_array(v, name) for name, v in self.made.items() if name in read)
        return out

    @staticmethod
    def _live(nodes: list[NodeProto], outputs: set[str]) -> list[NodeProto]:
        """The nodes whose results something reads: what a rewrite left
        unread (a masked_scatter's NonZero and the count it fed) goes, as
        onnx-simplifier drops it."""
        live, kept = set(outputs), []
        for node in reversed(nodes):
            if any(name in live for name in node.output):
                kept.append(node)
                live.update(node_reads(node))
        return kept[::-1]

    # -- the walk

    def _keep(self, node: NodeProto) -> None:
        for name in node_reads(node):
            if name in self.seqs and name not in self.built:
                self._build_sequence(name)
        self.nodes.append(node)
        self._infer_outputs(node)

    def _infer_outputs(self, node: NodeProto) -> None:
        """The static types of a kept node's outputs that the round's folds
        made known (ONNX's inference of this one node, given the values
        known): a `Shape` further on then folds in this round, not the next
        (Swin's 12 blocks each pad by a size computed from the last)."""
        if node.domain not in ("", "ai.onnx") or all(is_static(self.types.get(o)) for o in node.output if o):
            return
        inputs = [n for n in node.input if n]
        if not all(is_static(self.types.get(n)) for n in inputs) or \
                any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            return
        data = {n: numpy_helper.from_array(self.known[n], n) for n in inputs
                if n in self.known and self.known[n].size <= _SHAPE_DATA and self.known[n].dtype == np.int64}
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, node.domain)
            found = onnx.shape_inference.infer_node_outputs(
                schema, node, {n: self.types[n] for n in inputs}, data, opset_imports=list(self.source.opset_import))
        except Exception:  # (inference failing here is the full inference's to report, or not)
            return
        for name, tp in found.items():
            if is_static(tp) and not is_static(self.types.get(name)):
                self.types[name] = tp

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
        dispatched = self._dispatch(node)
        if dispatched is None:
            dispatched = self._masked_scatter_nd(node)
        if dispatched is not None:
            return dispatched
        if op in SEQUENCE_OPS or (op == "Identity" and node.input[0] in self.seqs):
            return self._sequence(node)
        if expandable(op, self.opset):
            types = [self.types.get(name) if name else None for name in node.input]
            body = function_body(node, types, self.opset)
            if body is not None:
                return expand(node, body, self.opset)
            # no body here (Range's Loop, written for another opset): folded whole if its inputs are known
        if op in _KEEP or any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            return None
        if op in ("Shape", "Size"):
            shape = static_shape(self.types.get(node.input[0]))
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
                shape = static_shape(self.types.get(name))
                elem = self.types[name].tensor_type.elem_type if shape is not None else 0
                if shape is None or 0 not in shape or not elem:
                    return None
                self.known[name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))
        if not self._small_enough(node):
            return None
        values = self._evaluate(node, [self.known[n] if n else None for n in node.input])
        return None if values is None else self._fold(node, values)

    def _evaluate(self, node: NodeProto, inputs: list) -> list[np.ndarray] | None:
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

def _shape_slice(node: NodeProto, shape: list[int]) -> np.ndarray:
    """`Shape`'s output with its `start`/`end` attributes (opset 15)."""
    attrs = {a.name: a.i for a in node.attribute}
    rank = len(shape)
    start = attrs.get("start", 0)
    end = attrs.get("end", rank)
    return np.array(shape[slice(start, end)], np.int64)


