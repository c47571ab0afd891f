"""The data formats a program is compiled for (`onnx-to-forge{data-format=,
weight-format=}`), as two passes:

- `tir-data-format{format=bfloat16}`: every float32 (and float16) value of a
  `tir` module (inputs, weights, constants, every op's result) becomes bfloat16, Forge's
  `Float16_b`, as TT-Forge-ONNX's users cast a model and its inputs; the
  program's signature says what its inputs and outputs are. A constant
  beyond bfloat16's range is saturated to its finite extreme (a mask's fill,
  which rounded to an infinity would make NaN), counted in the module's
  `forge.saturated_constants`; a model weight so saturated is named in
  `forge.saturated_weights`, and the emitted module saturates it as it
  loads it.
- `mark-weight-formats{format=bfp8_b}`: the weights tt-mlir stores as block
  floats, marked `weight_format` (the B operand of a `forge.matmul` computed
  from weights alone, as its weight-dtype conversion picks them), and the
  module's `forge.weight_format`, which the emitted module passes to tt-mlir
  (`experimental-weight-dtype`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    bf16,
    f16,
    f32,
    i64,
)
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from forge_opt.data_formats import (
    BFLOAT16_MAX,
    BLOCK_FORMATS,
    FORMATS,
    PROGRAM_FORMATS,
    SATURATED_ATTR,
    SATURATED_WEIGHTS_ATTR,
    WEIGHT_FORMAT_ATTR,
    FormatName,
    device_values,
    parse,
    saturated,
)
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import forge, tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array

#: the element types a bfloat16 program holds as bfloat16 (a float16 export's too; float64 Forge has not)
_WIDER = (f32, f16)


def _narrowed(t):
    if isinstance(t, TensorType) and t.element_type in _WIDER:
        return TensorType(bf16, t.get_shape())
    return t


def _to_bfloat16(module: ModuleOp) -> None:
    for func in [op for op in module.ops if isinstance(op, FuncOp)]:
        for arg in list(func.body.block.args):
            if _narrowed(arg.type) is not arg.type:
                Rewriter.replace_value_with_new_type(arg, _narrowed(arg.type))
        ins = [_narrowed(t) for t in func.function_type.inputs.data]
        outs = [_narrowed(t) for t in func.function_type.outputs.data]
        func.function_type = FunctionType.from_lists(ins, outs)
    count, weights = 0, []
    for op in list(module.walk()):
        if isinstance(op, tir.ConstantOp) and isinstance(op.value, DenseIntOrFPElementsAttr) and \
                op.value.get_element_type() in _WIDER:
            values, beyond = saturated(attr_to_array(op.value))
            op.value = array_to_attr(device_values(values, "bfloat16"))
            count += beyond
            if beyond and op.weight_name is not None:  # the emitted module loads it: it saturates it too
                weights.append(op.weight_name.data)
        elif isinstance(op, tir.FullOp) and isinstance(op.fill, FloatAttr) and op.fill.type in _WIDER:
            fill, beyond = saturated(np.array(op.fill.value.data, np.float32))
            op.fill = FloatAttr(float(fill), bf16)
            count += beyond
        for r in list(op.results):
            if _narrowed(r.type) is not r.type:
                Rewriter.replace_value_with_new_type(r, _narrowed(r.type))
    if count:
        module.attributes[SATURATED_ATTR] = IntegerAttr(count, i64)
    if weights:
        module.attributes[SATURATED_WEIGHTS_ATTR] = ArrayAttr([StringAttr(n) for n in weights])


def saturation_notes(module: ModuleOp) -> list[str]:
    """The report's line on the constants `tir-data-format` saturated, if any."""
    count = module.attributes.get(SATURATED_ATTR)
    if not isinstance(count, IntegerAttr):
        return []
    n = count.value.data
    return [f"{n} constant value{'' if n == 1 else 's'} beyond bfloat16's range (a mask's fill, such as "
            f"torch.finfo(float32).min) held at bfloat16's finite extreme, ±{BFLOAT16_MAX:.4e}, not rounded to an "
            "infinity"]


@dataclass(frozen=True)
class TirDataFormatPass(ModulePass):
    """Every float32 and float16 value of a `tir` module in `format`
    (bfloat16): inputs, weights, constants and results alike."""

    name = "tir-data-format"

    format: str = "bfloat16"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fmt = parse(self.format, PROGRAM_FORMATS, "tir-data-format: format")
        for inner in op.walk():
            if isinstance(inner, forge.ForgeOp | forge.ParameterOp | forge.ConstantOp):
                raise ForgeOptError("tir-data-format rewrites `tir`: run it before tir-to-forge")
        if fmt == FormatName.BFLOAT16:
            _to_bfloat16(op)


def matmul_weights(module: ModuleOp, matmuls: Callable[[Operation], SSAValue | None],
                   is_weight: Callable[[Operation], bool]) -> list[Operation]:
    """The weights tt-mlir's weight-dtype conversion stores as block floats:
    those every matmul's B operand (`matmuls(op)`, None for any other op) is
    computed from, where it is computed from weights alone; in order, once
    each. The one rule, for `forge` (the marks) and for `tir` (the sizing)."""
    # forward, in program order (a value's operands come before it): what each value is computed from
    weights: dict[SSAValue, list[Operation] | None] = {}
    for op in module.walk():
        if is_weight(op):
            found: list[Operation] | None = [op]
        else:  # from nothing (indices of a permutation, a fill) is from weights alone, as tt-mlir's consteval
            found = []
            for operand in op.operands:
                inner = weights.get(operand)  # an input, or a block's argument: not a weight
                if inner is None:
                    found = None
                    break
                found += inner
        for r in op.results:
            weights[r] = found
    out: dict[Operation, None] = {}
    for op in module.walk():
        b = matmuls(op)
        if b is not None:
            out.update(dict.fromkeys(weights.get(b) or ()))
    return list(out)


def forge_weight_operand(op: Operation) -> SSAValue | None:
    """The operand of a `forge` op that a block float may store (a matmul's B: its record says)."""
    i = op.FUNCTION.weight_operand if isinstance(op, forge.ForgeOp) else None
    return None if i is None else op.operands[i]


@dataclass(frozen=True)
class MarkWeightFormatsPass(ModulePass):
    """The weights a matmul reads as its B operand, computed from weights
    alone, marked with the block float `format` tt-mlir stores them in; the
    module's `forge.weight_format` is the setting."""

    name = "mark-weight-formats"

    format: str = "bfp8_b"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fmt = parse(self.format, BLOCK_FORMATS, "mark-weight-formats: format")
        attr = forge.DataFormatAttr(fmt)
        weight_ops = forge.ParameterOp | forge.ConstantOp
        for weight in matmul_weights(op, forge_weight_operand, lambda w: isinstance(w, weight_ops)):
            assert isinstance(weight, forge.ParameterOp | forge.ConstantOp)
            weight.weight_format = attr
        op.attributes[WEIGHT_FORMAT_ATTR] = attr


def data_format_passes(data_format: FormatName) -> list[ModulePass]:
    """What a pipeline runs on `tir` to compute in `data_format` (nothing
    for float32)."""
    return [TirDataFormatPass(data_format)] if data_format != FormatName.FLOAT32 else []


def weight_format_passes(weight_format: FormatName) -> list[ModulePass]:
    """What a pipeline runs after `fold-weight-layouts` to store the matmul
    weights in `weight_format` (nothing unless a block float)."""
    return [MarkWeightFormatsPass(weight_format)] if weight_format in BLOCK_FORMATS else []


def checked_formats(data_format: str, weight_format: str) -> tuple[FormatName, FormatName]:
    """The two formats of `onnx-to-forge`'s options, checked: a program
    format, and a weight format that is it (the default) or a block float."""
    data = parse(data_format, PROGRAM_FORMATS, "onnx-to-forge: data-format")
    weights = parse(weight_format or data, tuple(FORMATS), "onnx-to-forge: weight-format")
    if weights in PROGRAM_FORMATS and weights != data:
        raise ForgeOptError(f"onnx-to-forge: weight-format={weights} with data-format={data}: a matmul takes its "
                            f"weights in the program's format, or as a block float ({', '.join(BLOCK_FORMATS)})")
    return data, weights
