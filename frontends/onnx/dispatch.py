"""A mixture of experts' dispatch at a fixed size.

Hugging Face's MoE layers (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE) send each
expert its tokens with `idx, top_x = torch.where(expert_mask[e])`, run the
expert on those rows and `index_add_` the weighted results back. Exported,
that is a `NonZero` whose row count is data, then Gathers, the expert's MLP
and a `ScatterElements` into zeros: no fixed-shape program can hold it.

Fixed-shape hardware runs such a layer on every token instead, each
weighted by whether it chose the expert. That is exact here:
M[k, t] = (token t's k-th choice, of TopK's, is expert e) has at most one k
per token, since TopK's choices for a token are distinct. So every token is
one row of the NonZero: its coordinates are (the k it chose e at, or 0; t)
and it is valid when max_k M[k, t] is 1. Every row is computed, and the
scatter's updates are multiplied by the row's validity: a token that did
not choose the expert adds exactly zero.

The NonZero is rewritten only where that is provably the same program:
M's chain back to TopK's indices is recognised (OneHot, Transpose, a Gather
of one expert, Casts, Squeezes), and every value the row count reaches is
computed row by row (no reduction or reshuffle across rows, no model
output) and ends in such a scatter, into zeros or adding. Otherwise the
NonZero stays, and the import says its size is not known.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto

from forge_opt.frontends.onnx.round import RoundState, node_attr, static_shape

#: ops that compute row by row: the row count stays an axis of their result
_ROW_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal", "Sigmoid", "Tanh", "Relu",
    "Erf", "Gelu", "Softplus", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Mish", "Clip", "Min", "Max",
    "Where", "Equal", "Less", "Greater", "Not", "And", "Or", "Cast", "CastLike", "Identity", "Transpose",
    "Unsqueeze", "Expand", "MatMul", "Gather", "Split", "Squeeze", "Reshape",
})
#: ops that carry a shape vector holding the row count on
_SIZE_OPS = frozenset({"Concat", "Gather", "Slice", "Unsqueeze", "Squeeze", "Cast", "Identity"})


class FixedSizeDispatch(RoundState):
    """The walk's steps for an expert's NonZero and its scatter."""

    def __init__(self, model: ModelProto):
        super().__init__(model)
        self.masked: dict[str, tuple[str, int]] = {}  # a scatter's output: its rows' validity and count
        # a rewritten NonZero's coordinates (or their transpose): the axis they are stacked along, and each
        # coordinate's row as a [1, rows] value
        self.coordinates: dict[str, tuple[int, list[str]]] = {}

    def _dispatch(self, node: NodeProto) -> list[NodeProto] | None:
        """The nodes replacing an expert's NonZero, its scatter or a step
        taking its coordinates apart; None for any other node, or to keep
        this one."""
        op = node.op_type
        if op == "NonZero" and node.input[0] not in self.known:  # (a known one folds as any node)
            return self._nonzero(node)
        if op == "ScatterElements" and node.output[0] in self.masked:
            return self._masked_scatter(node)
        if node.input and node.input[0] in self.coordinates:
            return self._coordinates_step(node)
        return None

    def _nonzero(self, node: NodeProto) -> list[NodeProto] | None:
        """A NonZero of one expert's routing mask as one row per token, or
        None to keep it."""
        m = node.input[0]
        shape = static_shape(self.types.get(m))
        choice = self._choice_axis(m)
        if shape is None or choice is None or len(shape) < 2:
            return None
        scatters = self._scatters(node.output[0])
        if scatters is None:
            return None
        label = node.name or node.output[0]
        tokens = [d for i, d in enumerate(shape) if i != choice]
        rows = math.prod(tokens)
        nodes: list[NodeProto] = []

        def add(op: str, inputs: list[str], what: str, **attrs) -> str:
            out = self._unique(f"{label}/{what}")
            nodes.append(onnx.helper.make_node(op, inputs, [out], name=out, **attrs))
            return out

        mask = add("Cast", [m], "mask", to=TensorProto.FLOAT)
        chosen = add("Reshape", [add("ArgMax", [mask], "slot", axis=choice, keepdims=0),
                                 self._constant(f"{label}/row", np.array([1, rows], np.int64))], "slots")
        grid = np.indices(tokens, dtype=np.int64).reshape(len(tokens), rows)
        token_rows = iter(self._constant(f"{label}/tokens", grid[i:i + 1]) for i in range(len(tokens)))
        coordinates = [chosen if axis == choice else next(token_rows) for axis in range(len(shape))]
        nodes.append(onnx.helper.make_node("Concat", coordinates, [node.output[0]], axis=0, name=label))
        # its rows, [1, rows] each, for the Splits and Gathers that take them apart (`_coordinates_step`): the
        # tokens' rows are constants, and what is computed from them alone (the scatter's indices) folds
        self.coordinates[node.output[0]] = (0, coordinates)
        valid = self._reduce_max(mask, choice, nodes, label)
        if len(tokens) > 1:
            valid = add("Reshape", [valid, self._constant(f"{label}/rows", np.array([rows], np.int64))], "valid")
        for scatter in scatters:
            self.masked[scatter.output[0]] = (valid, rows)
        return nodes

    def _masked_scatter(self, node: NodeProto) -> list[NodeProto] | None:
        """The scatter of a rewritten NonZero's rows, each update times its
        row's validity."""
        valid, rows = self.masked.pop(node.output[0])
        updates = node.input[2]
        rank = len(self.types[updates].tensor_type.shape.dim)
        axis = node_attr(node, "axis", 0) % rank
        label = node.name or node.output[0]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if self.opset >= 16:
            # into zeros, adding is writing where the routed rows' positions are distinct (ONNX asks that of
            # them), and the other rows, which may share a position with one, add their zeros
            attrs["reduction"] = "add"
        nodes = []
        elem = self.types[updates].tensor_type.elem_type
        if elem != TensorProto.FLOAT:
            cast = self._unique(f"{label}/valid")
            nodes.append(onnx.helper.make_node("Cast", [valid], [cast], to=elem, name=cast))
            valid = cast
        along = self._constant(f"{label}/along", np.array([rows if i == axis else 1 for i in range(rank)], np.int64))
        shaped, masked = self._unique(f"{label}/valid"), self._unique(f"{label}/masked")
        return [
            *nodes,
            onnx.helper.make_node("Reshape", [valid, along], [shaped], name=shaped),
            onnx.helper.make_node("Mul", [updates, shaped], [masked], name=masked),
            onnx.helper.make_node("ScatterElements", [node.input[0], node.input[1], masked], list(node.output),
                                  name=node.name, domain=node.domain, **attrs),
        ]

    def _coordinates_step(self, node: NodeProto) -> list[NodeProto] | None:
        """A Transpose, Split or Gather of a rewritten NonZero's coordinates:
        the rows it takes, as the values they are (so a constant row stays
        one), or None to keep the node."""
        axis, rows = self.coordinates[node.input[0]]
        op = node.op_type
        if op == "Transpose" and list(node_attr(node, "perm") or [1, 0]) == [1, 0]:
            self.coordinates[node.output[0]] = (1 - axis, rows)
            return None
        taken: list[str] | None = None
        if op == "Split" and node_attr(node, "axis", 0) % 2 == axis and len(node.output) == len(rows):
            sizes = self.known.get(node.input[1]) if len(node.input) > 1 and node.input[1] else node_attr(node, "split")
            if sizes is None or all(int(n) == 1 for n in np.asarray(sizes).reshape(-1)):
                taken = rows
        elif op == "Gather" and node_attr(node, "axis", 0) % 2 == axis and node.input[1] in self.known:
            index = self.known[node.input[1]]
            if index.ndim == 0:  # the row itself, [rows]
                return [onnx.helper.make_node("Reshape", [rows[int(index) % len(rows)], self._constant(
                    f"{node.output[0]}/shape", np.array([-1], np.int64))], [node.output[0]], name=node.name)]
            if index.size == 1:
                taken = [rows[int(index.reshape(-1)[0]) % len(rows)]]
        if taken is None:
            return None
        # each a [1, rows] row, laid out as the op gives it: [1, rows] or [rows, 1]
        return [onnx.helper.make_node("Reshape" if axis == 0 else "Transpose", [row] + (
            [self._constant(f"{out}/shape", np.array([1, -1], np.int64))] if axis == 0 else []), [out], name=out)
                for row, out in zip(taken, node.output)]

    # -- the proof

    def _choice_axis(self, m: str) -> int | None:
        """The axis of M that is TopK's choice, if M is one expert's slice
        of a one-hot of TopK's indices (at most one 1 per token)."""
        producers, _ = self._graph_maps()
        chain: list[NodeProto] = []
        node = producers.get(m)
        while node is not None and node.op_type != "OneHot" and len(chain) < 8:
            chain.append(node)
            node = producers.get(node.input[0]) if node.input else None
        if node is None or node.op_type != "OneHot":
            return None
        off_on = self.known.get(node.input[2])
        topk = producers.get(node.input[0])
        indices = static_shape(self.types.get(node.input[0]))
        if off_on is None or off_on.size != 2 or off_on.reshape(-1)[0] != 0 or off_on.reshape(-1)[1] == 0 or \
                topk is None or topk.op_type != "TopK" or list(topk.output).index(node.input[0]) != 1 or \
                indices is None:
            return None
        rank = len(indices)
        choice = node_attr(topk, "axis", -1) % rank
        labels: list[object] | None = ["k" if i == choice else i for i in range(rank)]
        labels.insert(node_attr(node, "axis", -1) % (rank + 1), "expert")
        for step in reversed(chain):
            labels = self._labels_after(step, labels)
            if labels is None:
                return None
        if "expert" in labels or "one expert" in labels or labels.count("k") != 1:
            return None
        return labels.index("k")

    def _labels_after(self, node: NodeProto, labels: list[object]) -> list[object] | None:
        op = node.op_type
        if op in ("Cast", "Identity"):
            return labels
        if op == "Transpose":
            perm = node_attr(node, "perm") or list(reversed(range(len(labels))))
            return [labels[p] for p in perm]
        if op == "Gather":
            axis = node_attr(node, "axis", 0) % len(labels)
            index = self.known.get(node.input[1])
            if index is None or labels[axis] != "expert" or index.size != 1 or index.ndim > 1:
                return None
            return labels[:axis] + ([] if index.ndim == 0 else ["one expert"]) + labels[axis + 1:]
        if op == "Squeeze":
            axes = self.known.get(node.input[1]) if len(node.input) > 1 else node_attr(node, "axes")
            if axes is None:
                return None
            gone = {int(a) % len(labels) for a in np.asarray(axes).reshape(-1)}
            if any(labels[a] != "one expert" for a in gone):
                return None
            return [label for i, label in enumerate(labels) if i not in gone]
        return None

    def _scatters(self, start: str) -> list[NodeProto] | None:
        """The scatters the NonZero's rows end in, if every value they reach
        is computed row by row and ends in one (into zeros, or adding)."""
        _, consumers = self._graph_maps()
        outputs = {o.name for o in self.source.graph.output}
        rows, sizes = {start}, set()  # values with the row count as an axis; shape vectors holding it
        work, scatters = deque([start]), []
        while work:
            value = work.popleft()
            if value in outputs:
                return None
            for node in consumers.get(value, []):
                op = node.op_type
                if op == "ScatterElements" and value != node.input[0]:
                    if node not in scatters:  # checked once every value the rows reach is known
                        scatters.append(node)
                    continue
                if value in sizes:
                    if op in _SIZE_OPS:
                        made = sizes
                    elif (op in ("Reshape", "Expand") and value == node.input[1]) or op == "ConstantOfShape":
                        made = rows
                    else:
                        return None
                elif op == "Shape":
                    made = sizes
                elif op in _ROW_OPS and self._row_by_row(node, value):
                    made = rows
                else:
                    return None
                for out in node.output:
                    if out and out not in rows and out not in sizes:
                        made.add(out)
                        work.append(out)
        if not scatters or not all(self._scatter_of_rows(node, rows | sizes) for node in scatters):
            return None
        return scatters

    def _scatter_of_rows(self, node: NodeProto, reached: set[str]) -> bool:
        """A scatter whose indices and updates are the rows (along its axis)
        into a tensor they do not reach: into zeros, or adding."""
        reduction = node_attr(node, "reduction", b"none")
        reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
        data, indices, updates = node.input[:3]
        if data in reached or indices not in reached or updates not in reached or reduction not in ("none", "add"):
            return False
        tp = self.types.get(updates)
        if tp is None or not tp.tensor_type.elem_type or not tp.tensor_type.HasField("shape"):
            return False
        dims = tp.tensor_type.shape.dim
        axis = node_attr(node, "axis", 0) % len(dims)
        if [i for i, d in enumerate(dims) if not d.HasField("dim_value")] != [axis]:
            return False
        return reduction == "add" or self._zeros(data)

    def _zeros(self, name: str) -> bool:
        if name in self.known:
            return not np.any(self.known[name])
        producers, _ = self._graph_maps()
        node = producers.get(name)
        if node is None or node.op_type != "ConstantOfShape":
            return False
        value = node_attr(node, "value")
        return value is None or not np.any(onnx.numpy_helper.to_array(value))

    def _row_by_row(self, node: NodeProto, value: str) -> bool:
        """Whether `node` reading the rows `value` keeps them rows: the row
        count stays an axis of its results and no axis it works along (a
        contraction, a split, a gathered axis) is the row count."""
        unknown = self._unknown_axes(value)
        if unknown is None or not unknown or any(not self._unknown_axes(o) for o in node.output if o):
            return False
        op, rank = node.op_type, len(self.types[value].tensor_type.shape.dim)
        if op == "MatMul":
            contracted = rank - 1 if value == node.input[0] else rank - 2
            return contracted not in unknown
        if op in ("Gather", "Split"):
            return value != node.input[0] or node_attr(node, "axis", 0) % rank not in unknown
        if op == "Reshape":  # rows kept whole: 1s before the rows, the same row size after, on both sides
            return self._row_size(value) is not None and self._row_size(value) == self._row_size(node.output[0])
        return True

    def _unknown_axes(self, name: str) -> list[int] | None:
        tp = self.types.get(name)
        if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
            return None
        return [i for i, d in enumerate(tp.tensor_type.shape.dim) if not d.HasField("dim_value")]

    def _row_size(self, name: str) -> int | None:
        """The elements of one row of a value whose one unknown axis (the
        rows) has only 1s before it."""
        unknown = self._unknown_axes(name)
        if unknown is None or len(unknown) != 1:
            return None
        dims = [d.dim_value for d in self.types[name].tensor_type.shape.dim]
        return math.prod(dims[unknown[0] + 1:]) if all(d == 1 for d in dims[:unknown[0]]) else None

    def _reduce_max(self, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        """ReduceMax over one axis, in the model's opset (axes became an
        input at 18)."""
        out = self._unique(f"{label}/valid")
        if self.opset >= 18:
            axes = self._constant(f"{label}/slot_axis", np.array([axis], np.int64))
            nodes.append(onnx.helper.make_node("ReduceMax", [value, axes], [out], keepdims=0, name=out))
        else:
            nodes.append(onnx.helper.make_node("ReduceMax", [value], [out], axes=[axis], keepdims=0, name=out))
        return out
