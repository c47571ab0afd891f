"""`onnx-to-tir`: rewrite `onnx` ops into framework-neutral `tir` ops."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.transforms.dead_code_elimination import dce
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir


def constant_value(value: SSAValue) -> np.ndarray | None:
    """The value of an `onnx.Constant` result as a numpy array, else None."""
    op = value.owner
    if not isinstance(op, onnx.ConstantOp) or op.value is None:
        return None
    attr = op.value
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        return None
    dtype = dtypes.numpy_dtype(attr.get_element_type())
    return np.frombuffer(attr.data.data, dtype).reshape(attr.get_shape())


class SplitToTir(RewritePattern):
    """`onnx.Split` in any form (constant `split` operand, `num_outputs`, or
    equal parts) -> `tir.split` with explicit sections."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: onnx.SplitOp, rewriter: PatternRewriter) -> None:
        x = op.input
        if not isinstance(x.type, TensorType):
            raise ForgeOptError(f"{describe(op)}: the input needs a ranked type")
        shape = x.type.get_shape()
        rank = len(shape)
        axis = op.axis.value.data
        if not -rank <= axis < rank:
            raise ForgeOptError(f"{describe(op)}: axis {axis} is out of range for rank {rank}")
        axis %= rank
        dim = shape[axis]
        if dim < 0:
            raise ForgeOptError(f"{describe(op)}: the split dimension {axis} is dynamic")
        count = len(op.outputs)
        try:
            if op.split is not None:
                sizes = constant_value(op.split)
                if sizes is None:
                    raise ForgeOptError(
                        f"{describe(op)}: the 'split' input must be a constant to lower to Forge"
                    )
                sections = [int(s) for s in sizes.reshape(-1)]
                if len(sections) != count:
                    raise ForgeOptError(
                        f"{describe(op)}: 'split' has {len(sections)} sizes but the node has {count} outputs"
                    )
                if sum(sections) != dim or any(s < 0 for s in sections):
                    raise ForgeOptError(
                        f"{describe(op)}: split sizes {sections} do not sum to dimension {axis} of size {dim}"
                    )
            elif op.num_outputs is not None:
                parts = op.num_outputs.value.data
                if parts != count:
                    raise ForgeOptError(f"{describe(op)}: num_outputs is {parts} but the node has {count} outputs")
                sections = tir.split_sections(dim, size=-(-dim // parts))
                if len(sections) != parts:
                    raise ForgeOptError(
                        f"{describe(op)}: dimension {axis} of size {dim} cannot be split into {parts} parts"
                    )
            else:
                sections = tir.split_sections(dim, parts=count)
        except ValueError as e:
            raise ForgeOptError(f"{describe(op)}: {e}") from None
        new = tir.SplitOp(x, axis, sections)
        new.location = op.location
        rewriter.replace(op, [new], list(new.outputs))


ONNX_TO_TIR_PATTERNS = [SplitToTir()]


@dataclass(frozen=True)
class OnnxToTirPass(ModulePass):
    """Rewrite `onnx` ops into `tir` ops; ops without a rewrite stay and are
    reported by `tir-to-forge`."""

    name = "onnx-to-tir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(ONNX_TO_TIR_PATTERNS), apply_recursively=False
        ).rewrite_module(op)
        dce(op)
