"""`forge-to-stablehlo`: a module of `forge` ops as one StableHLO program.

The public `@main` takes the graph's inputs in the model's order and returns
its outputs in order; weights are `stablehlo.constant`s, laid out as
`process_framework_parameters` lays them out, and a block-float weight
(`mark-weight-formats`) holds the values the device holds
(`device_values`). Each `forge` op becomes its record's StableHLO form
(`forge_functions/stablehlo_*.py`); an op of a narrow float type
(bfloat16, float16) computes in float32 and rounds its result once, as
Forge's golden does. An op with no form, or anything else the program
holds, is an error naming it and its ONNX node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType, f32
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.data_formats import device_values
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import forge
from forge_opt.dialects.elements import attr_to_array
from forge_opt.dialects.forge_functions.stablehlo_forms import FORMS
from forge_opt.dialects.stablehlo_build import Hlo, element
from forge_opt.interpreters.forge import fill_array, laid_out


def _weight(op: forge.ParameterOp | forge.ConstantOp) -> np.ndarray:
    if isinstance(op, forge.ParameterOp):
        array = laid_out(attr_to_array(op.value), op.steps())
    else:
        array = attr_to_array(op.value) if op.value is not None else fill_array(op)
    if op.weight_format is not None:
        array = device_values(array, op.weight_format.data)
    return np.ascontiguousarray(array)


def _narrow(t) -> bool:
    return isinstance(t, TensorType) and dtypes.is_narrow_float(dtypes.numpy_dtype(t.element_type))


def lower_op(h: Hlo, op: forge.ForgeOp, values: dict[SSAValue, SSAValue]) -> SSAValue:
    """One `forge` op as its StableHLO form."""
    fn = op.FUNCTION
    form = FORMS.get(fn.name)
    if form is None:
        raise ForgeOptError(f"{describe(op)}: forge.op.{fn.name} has no StableHLO form")
    out = op.results[0].type
    assert isinstance(out, TensorType)
    args: list[SSAValue | None] = []
    for name in fn.fields:
        v = getattr(op, name)
        if v is None or isinstance(v, SSAValue):
            args.append(None if v is None else values[v])
        else:
            args.extend(values[x] for x in v)
    narrow = _narrow(out) or any(a is not None and _narrow(a.type) for a in args)
    if narrow:  # the golden computes in float32 and rounds once
        args = [a if a is None or not _narrow(a.type) else h.convert(a, f32) for a in args]
        wide_out = TensorType(f32, out.get_shape()) if _narrow(out) else out
        result = form(h, forge.rule_call(op), args, wide_out)
        result = h.convert(result, out.element_type)
    else:
        result = form(h, forge.rule_call(op), args, out)
    if result.type != out:
        raise ForgeOptError(f"{describe(op)}: the StableHLO form of forge.op.{fn.name} gives {result.type}, "
                            f"where Forge gives {out}")
    return result


def lower_function(source: func.FuncOp, name: str = "main") -> func.FuncOp:
    """`source`'s body as a public function of StableHLO ops named `name`."""
    block = Block(arg_types=source.function_type.inputs.data)
    values: dict[SSAValue, SSAValue] = dict(zip(source.body.block.args, block.args))
    for old, new in zip(source.body.block.args, block.args):
        if old.name_hint:
            new.name_hint = old.name_hint
    h = Hlo(block)
    for op in source.body.block.ops:
        if isinstance(op, forge.ParameterOp | forge.ConstantOp):
            values[op.results[0]] = h.const(_weight(op))
            if element(values[op.results[0]]) != op.results[0].type.element_type:  # type: ignore[attr-defined]
                raise ForgeOptError(f"{describe(op)}: its value's type differs from its result's")
        elif isinstance(op, forge.ForgeOp):
            values[op.results[0]] = lower_op(h, op, values)
        elif isinstance(op, func.ReturnOp):
            block.add_op(func.ReturnOp(*(values[v] for v in op.arguments)))
        else:
            raise ForgeOptError(f"{describe(op)}: the stablehlo target takes forge ops only, not {op.name}")
        if op.results and op.results[0].name_hint and op.results[0] in values:
            values[op.results[0]].name_hint = op.results[0].name_hint
    lowered = func.FuncOp(name, source.function_type, Region(block), arg_attrs=source.arg_attrs,
                          res_attrs=source.res_attrs)
    return lowered


def public_function(module: ModuleOp) -> func.FuncOp:
    public = [op for op in module.ops if isinstance(op, func.FuncOp)
              and (op.sym_visibility is None or op.sym_visibility == StringAttr("public"))]
    if len(public) != 1:
        raise ForgeOptError(f"the stablehlo target takes a module with one public function, not {len(public)}")
    others = [op for op in module.ops if op is not public[0]]
    if others:
        raise ForgeOptError(f"{describe(others[0])}: the stablehlo target takes one function of forge ops; "
                            f"this module also holds {others[0].name} (a split program: print each part)")
    return public[0]


@dataclass(frozen=True)
class ForgeToStableHLO(ModulePass):
    """Rewrites a module of one function of `forge` ops into `@main` of StableHLO ops."""

    name = "forge-to-stablehlo"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        source = public_function(op)
        lowered = lower_function(source)
        op.body.block.insert_op_before(lowered, source)
        op.body.block.erase_op(source)



