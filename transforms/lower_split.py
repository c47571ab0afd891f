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
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from forge_opt.dialects import tir


class SplitToStridedSlices(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tir.SplitOp, rewriter: PatternRewriter) -> None:
        axis = op.axis.value.data
        dim = op.input.type.get_shape()[axis]
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
        rewriter.replace(op, new_ops, values)


@dataclass(frozen=True)
class LowerSplitPass(ModulePass):
    """Rewrite `tir.split` into single-axis `tir.strided_slice` ops."""

    name = "lower-split"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([SplitToStridedSlices()]), apply_recursively=False
        ).rewrite_module(op)
