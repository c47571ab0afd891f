"""Sequences of known length, for graph resolution (`resolve`): they
become their tensors (`SequenceAt` an `Identity`, `SplitToSequence` a
`Split`, `ConcatFromSequence` a `Concat`)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import NodeProto

from forge_opt.frontends.onnx.graph import node_label
from forge_opt.frontends.onnx.round import RoundState, static_shape

SEQUENCE_OPS = {
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
    "SequenceLength", "SplitToSequence", "ConcatFromSequence",
}


class ResolveSequences(RoundState):
    """The walk's steps for sequence ops: each resolved sequence is the list
    of its tensors' names (`seqs`)."""

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
        shape = static_shape(self.types.get(node.input[0]))
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
