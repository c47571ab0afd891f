"""`onnx-to-tir`: fold what is known at compile time, then rewrite `onnx`
ops into framework-neutral `tir` ops (one lowering function per ONNX op,
in `onnx_to_tir_*.py`). Ops without a lowering stay and are reported by
`tir-to-forge`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.passes import ModulePass

from forge_opt.transforms.fold_constants import fold_constant_op
from forge_opt.transforms.lowering import erase_dead_ops, rewrite_in_order, table_rewrite
from forge_opt.transforms.onnx_to_tir_ops import ONNX_LOWERINGS


@dataclass(frozen=True)
class OnnxToTirPass(ModulePass):
    """Fold constants and rewrite `onnx` ops into `tir` ops."""

    name = "onnx-to-tir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_in_order(op, fold_constant_op)
        rewrite_in_order(op, table_rewrite(ONNX_LOWERINGS))
        erase_dead_ops(op)
        refine_result_types(op)


def refine_result_types(module: ModuleOp) -> None:
    """Lowerings compute static shapes where ONNX inference left dimensions
    unknown; a function's result types follow the values it returns."""
    for func in module.ops:
        if not isinstance(func, FuncOp) or not func.body.blocks:
            continue
        ret = func.body.block.last_op
        if not isinstance(ret, ReturnOp):
            continue
        outputs = [v.type for v in ret.arguments]
        if list(func.function_type.outputs.data) != outputs:
            func.function_type = FunctionType.from_lists(list(func.function_type.inputs.data), outputs)
