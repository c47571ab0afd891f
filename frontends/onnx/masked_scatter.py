"""`masked_scatter` at a fixed size.

A multimodal decoder puts its image's features where its placeholder
tokens are: `inputs_embeds.masked_scatter(mask, features)` (Fuyu, LLaVA and
their kin in Hugging Face's code). torch exports that as

    indices = Transpose(NonZero(mask), perm=[1, 0])        # [k, rank]
    updates = Slice(Reshape(features, [-1]), 0, k)          # the first k
    out     = ScatterND(x, indices, updates)

whose k, the count of True in the mask, is data: no fixed-shape program
holds it. The same values at a fixed size: the i-th True position of the
mask, in row-major order (NonZero's), takes the features' i-th number, and
i is the running count of True before it. So

    position = Max(CumSum(flat mask) - 1, 0)
    out      = Where(mask, Reshape(Gather(flat features, position), shape(x)), x)

A position where the mask is False gathers some number the Where drops.
Exact whenever the export is valid: ScatterND needs exactly k updates, so
the Slice starts at 0, and k is at most the features' count.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import NodeProto, TensorProto

from forge_opt.frontends.onnx.round import RoundState, node_attr, static_shape


class FixedSizeMaskedScatter(RoundState):
    """The walk's step for a ScatterND that is torch's masked_scatter. The
    NonZero and the count it fed are then read by nothing (`model` drops
    them)."""

    def _masked_scatter_nd(self, node: NodeProto) -> list[NodeProto] | None:
        """The nodes replacing a masked_scatter's ScatterND; None for any
        other node, or to keep this one."""
        if node.op_type != "ScatterND" or node.domain not in ("", "ai.onnx") or \
                any(a.name == "reduction" and a.s not in (b"", b"none") for a in node.attribute):
            return None
        x, indices, updates = node.input
        mask, flat = self._mask(indices), self._first_numbers(updates)
        if mask is None or flat is None or mask in self.known:
            return None
        shape, numbers = static_shape(self.types.get(x)), static_shape(self.types.get(flat))
        mask_type = self.types.get(mask)
        if shape is None or static_shape(mask_type) != shape or numbers is None or len(numbers) != 1 \
                or not numbers[0] or mask_type is None:
            return None
        label = node.name or node.output[0]
        nodes: list[NodeProto] = []

        def add(op: str, inputs: list[str], what: str, out: str | None = None, **attrs) -> str:
            out = out or self._unique(f"{label}/{what}")
            nodes.append(onnx.helper.make_node(op, inputs, [out], name=out, **attrs))
            return out

        chosen = mask
        if mask_type.tensor_type.elem_type != TensorProto.BOOL:  # NonZero's truth: not zero
            chosen = add("Cast", [mask], "chosen", to=TensorProto.BOOL)
        ones = add("Reshape", [add("Cast", [chosen], "ones", to=TensorProto.INT64),
                               self._constant(f"{label}/flat", np.array([-1], np.int64))], "flat_ones")
        counted = add("CumSum", [ones, self._constant(f"{label}/axis", np.array(0, np.int64))], "counted")
        position = add("Max", [add("Sub", [counted, self._constant(f"{label}/one", np.array(1, np.int64))],
                                   "before"),
                               self._constant(f"{label}/zero", np.array(0, np.int64))], "position")
        taken = add("Gather", [flat, position], "taken", axis=0)
        shaped = add("Reshape", [taken, self._constant(f"{label}/shape", np.array(shape, np.int64))], "placed")
        add("Where", [chosen, shaped, x], "", out=node.output[0])
        return nodes

    def _mask(self, indices: str) -> str | None:
        """The mask whose True positions `indices` are: Transpose(NonZero(m), [1, 0])."""
        producers, _ = self._graph_maps()
        transpose = producers.get(indices)
        if transpose is None or transpose.op_type != "Transpose" or list(node_attr(transpose, "perm", ())) != [1, 0]:
            return None
        nonzero = producers.get(transpose.input[0])
        return nonzero.input[0] if nonzero is not None and nonzero.op_type == "NonZero" else None

    def _first_numbers(self, updates: str) -> str | None:
        """The flat array whose first numbers `updates` are: a Slice of it from 0, step 1, along axis 0."""
        producers, _ = self._graph_maps()
        piece = producers.get(updates)
        if piece is None or piece.op_type != "Slice" or len(piece.input) < 3:
            return None
        if self.opset < 10:  # (starts, ends and axes were attributes)
            return None
        starts = self.known.get(piece.input[1])
        axes = self.known.get(piece.input[3]) if len(piece.input) > 3 and piece.input[3] else np.array([0])
        steps = self.known.get(piece.input[4]) if len(piece.input) > 4 and piece.input[4] else np.array([1])
        if starts is None or axes is None or steps is None:
            return None
        if list(starts.reshape(-1)) != [0] or list(axes.reshape(-1)) not in ([0], [-1]) or \
                list(steps.reshape(-1)) != [1]:
            return None
        return piece.input[0]
