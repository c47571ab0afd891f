"""`lower-split`: each `tir.split` becomes one `tir.strided_slice` per piece.

A piece that covers the whole axis is the input itself and gets no slice
(as in TVM's LowerSplitToStridedSlice on Forge's path).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.transforms.lowering import Replacement, rewrite_in_order


def split_to_strided_slices(op: Operation) -> Replacement | None:
    if not isinstance(op, tir.SplitOp):
        return None
    axis = op.axis.value.data
    dim = dtypes.tensor(op.input.type).get_shape()[axis]
    new_ops: list[Operation] = []
    values: list[SSAValue] = []
    begin = 0
    for size in op.sections.get_values():
        if size == dim:
            values.append(op.input)
        else:
            piece = tir.StridedSliceOp(op.input, [axis], [begin], [begin + size], [1])
            piece.location = op.location
            new_ops.append(piece)
            values.append(piece.output)
        begin += size
    return new_ops, values


@dataclass(frozen=True)
class LowerSplitPass(ModulePass):
    """Rewrite `tir.split` into single-axis `tir.strided_slice` ops."""

    name = "lower-split"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_in_order(op, split_to_strided_slices)
