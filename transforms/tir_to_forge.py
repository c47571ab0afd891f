"""`tir-to-forge`: rewrite `tir` ops into `forge` ops, one per Forge call.

After the rewrite, only `forge`, `func` and `builtin` ops may remain: any
other op is an error naming it, its ONNX node and what would lower it.
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
from xdsl.transforms.dead_code_elimination import dce

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import forge, tir


class StridedSliceToIndex(RewritePattern):
    """One `forge.index` per sliced axis, chained; `dim` counted from the end."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tir.StridedSliceOp, rewriter: PatternRewriter) -> None:
        rank = len(op.input.type.get_shape())
        value: SSAValue = op.input
        new_ops: list[Operation] = []
        for axis, begin, end, stride in op.slices():
            size = value.type.get_shape()[axis]
            if (begin, end, stride) == (0, size, 1):
                continue
            # Forge asserts start < size; an empty piece at the very end is
            # the same empty slice taken one element earlier.
            if begin == end and begin == size:
                begin = end = size - 1
            index = forge.IndexOp(value, axis - rank, begin, end, stride)
            index.location = op.location
            new_ops.append(index)
            value = index.result
        rewriter.replace(op, new_ops, [value])


TIR_TO_FORGE_PATTERNS = [StridedSliceToIndex()]

# What lowers an op that reaches the end of `tir-to-forge` unlowered.
_DECOMPOSED_BY = {"tir.split": "lower-split"}

_ALLOWED_DIALECTS = ("forge.", "func.", "builtin.")


def check_lowered(module: ModuleOp) -> None:
    """Raise for the first op that has no Forge form."""
    for op in module.walk():
        if op.name.startswith(_ALLOWED_DIALECTS):
            continue
        if op.name in _DECOMPOSED_BY:
            hint = f"run '{_DECOMPOSED_BY[op.name]}' before 'tir-to-forge'"
        elif op.name.startswith("tir."):
            hint = "tir-to-forge has no Forge lowering for it"
        elif op.name == "onnx.Custom":
            hint = f"ops of domain '{op.domain.data}' ({op.op_type.data}) are not supported"
        elif op.name.startswith("onnx."):
            hint = f"{op.name} has no lowering to Forge yet"
        else:
            hint = "it is not a Forge op"
        raise ForgeOptError(f"{describe(op)}: cannot be lowered to Forge: {hint}")


@dataclass(frozen=True)
class TirToForgePass(ModulePass):
    """Rewrite `tir` ops into `forge` ops and check that nothing else is left."""

    name = "tir-to-forge"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(TIR_TO_FORGE_PATTERNS), apply_recursively=False
        ).rewrite_module(op)
        dce(op)
        check_lowered(op)
