"""`onnx-to-tir`: fold what is known at compile time, then rewrite `onnx`
ops into framework-neutral `tir` ops (one lowering function per ONNX op,
in `onnx_lowerings/`). Ops without a lowering stay and are reported by
`tir-to-forge`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    TensorType,
    UnrankedTensorType,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import onnx_ops
from forge_opt.dialects.onnx import CustomOp
from forge_opt.dialects.onnx_base import OptType, SeqType, StringType
from forge_opt.frontends.onnx import INPUT_DIMS_ATTR
from forge_opt.frontends.onnx.shapes import symbols_hint
from forge_opt.transforms.fold_constants import fold_constant_op
from forge_opt.transforms.lowering import erase_dead_ops, rewrite_in_order, table_rewrite
from forge_opt.transforms.onnx_lowerings.table import ONNX_LOWERINGS
from forge_opt.transforms.tir_builder import TirEmitter


@dataclass(frozen=True)
class OnnxToTirPass(ModulePass):
    """Fold constants and rewrite `onnx` ops into `tir` ops."""

    name = "onnx-to-tir"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_signature(op)
        check_domains(op)
        rewrite_in_order(op, fold_constant_op)
        rewrite_in_order(op, table_rewrite(ONNX_LOWERINGS, TirEmitter))
        erase_dead_ops(op)
        refine_result_types(op)


_CPU_PATH = "forge-split (AutoSplit) runs such parts of a model on the CPU"


def _not_a_forge_value(t: Attribute) -> str | None:
    if isinstance(t, SeqType | OptType):
        return "is a sequence or optional, which Forge has no value for"
    if isinstance(t, TensorType | UnrankedTensorType) and isinstance(t.element_type, StringType):
        return "holds strings, which Forge has no tensors for"
    return None


def _onnx_name(attrs: Attribute | None, index: int) -> str:
    """The ONNX name of a function argument or result, else `#index`."""
    name = attrs.data.get("onnx.name") if isinstance(attrs, DictionaryAttr) else None
    return name.data if isinstance(name, StringAttr) else f"#{index}"


def check_domains(module: ModuleOp) -> None:
    """Name what Forge cannot run at all, rather than the first op inside or
    downstream of it that needs sizes: an op of another domain (com.microsoft,
    ai.onnx.ml), and control flow the importer could not resolve (an If or a
    Loop whose condition or trip count is known only at run time)."""
    for op in module.walk():
        if isinstance(op, CustomOp):
            raise ForgeOptError(
                f"{describe(op)}: {op.op_type.data} is an op of domain '{op.domain.data}', which Forge cannot "
                f"run; {_CPU_PATH} (forge-check --fallback)"
            )
        if isinstance(op, onnx_ops.IfOp):
            cond = op.operands[0]
            name = cond.name_hint or "its condition"
            raise ForgeOptError(
                f"{describe(op)}: the If's condition '{name}' is known only at run time and Forge has no control "
                f"flow; --freeze {name} compiles the branch its value picks, and forge-split (forge-check "
                "--fallback) runs the If on the host with each branch on the device"
            )
        if isinstance(op, onnx_ops.LoopOp):
            raise ForgeOptError(
                f"{describe(op)}: the Loop's trip count or condition is known only at run time and Forge has no "
                f"control flow; {_CPU_PATH} (forge-check --fallback)"
            )


def check_signature(module: ModuleOp) -> None:
    """Forge takes and returns tensors of static shapes: a function whose
    inputs have unknown sizes gets one diagnostic listing every such input
    dim and the flags that fix them (instead of an error at the first op
    that needs a size); strings, sequences and optionals are named."""
    for func in module.ops:
        if not isinstance(func, FuncOp):
            continue
        outputs = func.function_type.outputs.data
        for i, (t, attrs) in enumerate(zip(outputs, func.res_attrs.data if func.res_attrs else [None] * len(outputs))):
            problem = _not_a_forge_value(t)
            if problem:
                raise ForgeOptError(f"graph output '{_onnx_name(attrs, i)}' {problem}; {_CPU_PATH}")
        unknown: list[tuple[str, list[str | int]]] = []
        args = func.args
        for arg, attrs in zip(args, func.arg_attrs.data if func.arg_attrs else [None] * len(args)):
            fields = attrs.data if isinstance(attrs, DictionaryAttr) else {}
            label = _onnx_name(attrs, arg.index)
            t = arg.type
            problem = _not_a_forge_value(t)
            if problem:
                raise ForgeOptError(f"graph input '{label}' {problem}; {_CPU_PATH}")
            if isinstance(t, UnrankedTensorType):
                unknown.append((label, ["?", "..."]))
            elif isinstance(t, TensorType) and any(d < 0 for d in t.get_shape()):
                symbols = fields.get(INPUT_DIMS_ATTR)
                names = [s.data for s in symbols.data] if isinstance(symbols, ArrayAttr) else []  # pyright: ignore[reportAttributeAccessIssue]
                dims: list[str | int] = [
                    n if n >= 0 else (names[i] if i < len(names) and names[i] else "?")
                    for i, n in enumerate(t.get_shape())
                ]
                unknown.append((label, dims))
        if unknown:
            raise ForgeOptError(symbols_hint(unknown))


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
