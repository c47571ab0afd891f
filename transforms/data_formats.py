"""The data formats a program is compiled for (`onnx-to-forge{data-format=,
weight-format=}`), as two passes:

- `tir-data-format{format=bfloat16}`: every float32 value of a `tir` module
  (inputs, weights, constants, every op's result) becomes bfloat16, Forge's
  `Float16_b`, as TT-Forge-ONNX's users cast a model and its inputs; the
  program's signature says what its inputs and outputs are.
- `mark-weight-formats{format=bfp8_b}`: the weights tt-mlir stores as block
  floats, marked `weight_format` (the B operand of a `forge.matmul` computed
  from weights alone, as its weight-dtype conversion picks them), and the
  module's `forge.weight_format`, which the emitted module passes to tt-mlir
  (`experimental-weight-dtype`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, FunctionType, ModuleOp, TensorType, bf16, f32
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from forge_opt.data_formats import (
    BLOCK_FORMATS,
    DATA_FORMAT_ATTR,
    FORMATS,
    PROGRAM_FORMATS,
    WEIGHT_FORMAT_ATTR,
    DataFormat,
    parse,
)
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import forge, tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array


def _narrowed(t):
    if isinstance(t, TensorType) and t.element_type == f32:
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
    for op in list(module.walk()):
        if isinstance(op, tir.ConstantOp) and isinstance(op.value, DenseIntOrFPElementsAttr) and \
                op.value.get_element_type() == f32:
            op.value = array_to_attr(attr_to_array(op.value).astype(np.dtype("bfloat16")))
        elif isinstance(op, tir.FullOp) and isinstance(op.fill, FloatAttr) and op.fill.type == f32:
            op.fill = FloatAttr(op.fill.value.data, bf16)
        for r in list(op.results):
            if _narrowed(r.type) is not r.type:
                Rewriter.replace_value_with_new_type(r, _narrowed(r.type))


@dataclass(frozen=True)
class TirDataFormatPass(ModulePass):
    """Every float32 value of a `tir` module in `format` (bfloat16): inputs,
    weights, constants and results alike."""

    name = "tir-data-format"

    format: str = "bfloat16"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fmt = parse(self.format, PROGRAM_FORMATS, "tir-data-format: format")
        for inner in op.walk():
            if isinstance(inner, forge.ForgeOp | forge.ParameterOp | forge.ConstantOp):
                raise ForgeOptError("tir-data-format rewrites `tir`: run it before tir-to-forge")
        if fmt == DataFormat.BFLOAT16:
            _to_bfloat16(op)
        op.attributes[DATA_FORMAT_ATTR] = forge.DataFormatAttr(fmt)


def _weights(value: SSAValue, seen: dict[SSAValue, list[Operation] | None]) -> list[Operation] | None:
    """The weights `value` is computed from, if it is computed from weights
    alone (None if any input reaches it)."""
    if value in seen:
        return seen[value]
    owner = value.owner
    found: list[Operation] | None
    if isinstance(owner, forge.ParameterOp | forge.ConstantOp):
        found = [owner]
    elif isinstance(owner, forge.ForgeOp) and owner.operands:
        found = []
        for operand in owner.operands:
            inner = _weights(operand, seen)
            if inner is None:
                found = None
                break
            found += inner
    else:
        found = None
    seen[value] = found
    return found


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
        seen: dict[SSAValue, list[Operation] | None] = {}
        for call in op.walk():
            if isinstance(call, forge.ForgeOp) and call.FORGE_FUNCTION == "Matmul":
                for weight in _weights(call.operands[1], seen) or ():
                    assert isinstance(weight, forge.ParameterOp | forge.ConstantOp)
                    weight.weight_format = attr
        op.attributes[WEIGHT_FORMAT_ATTR] = attr


def format_passes(data_format: DataFormat, weight_format: DataFormat) -> tuple[list[ModulePass], list[ModulePass]]:
    """What a pipeline runs on `tir` and after `fold-weight-layouts` for
    these formats (nothing for float32)."""
    on_tir: list[ModulePass] = [TirDataFormatPass(data_format)] if data_format != DataFormat.FLOAT32 else []
    after: list[ModulePass] = [MarkWeightFormatsPass(weight_format)] if weight_format in BLOCK_FORMATS else []
    return on_tir, after


def weight_format_of(data_format: str, weight_format: str) -> tuple[DataFormat, DataFormat]:
    """The two formats of `onnx-to-forge`'s options, checked: a program
    format, and a weight format that is it (the default) or a block float."""
    data = parse(data_format, PROGRAM_FORMATS, "onnx-to-forge: data-format")
    weights = parse(weight_format or data, tuple(FORMATS), "onnx-to-forge: weight-format")
    if weights in PROGRAM_FORMATS and weights != data:
        raise ForgeOptError(f"onnx-to-forge: weight-format={weights} with data-format={data}: a matmul takes its "
                            f"weights in the program's format, or as a block float ({', '.join(BLOCK_FORMATS)})")
    return data, weights
