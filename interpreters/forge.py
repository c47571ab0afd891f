"""numpy implementations of the `forge` ops: each record's golden (`forge_functions`)."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls
from xdsl.ir import Operation, SSAValue

from forge_opt import dtypes
from forge_opt.data_formats import FormatName, device_values
from forge_opt.dialects import forge
from forge_opt.dialects.elements import attr_to_array, fill_value


def run_forge_op(self, interp: Interpreter, op: forge.ForgeOp, args: tuple) -> tuple:
    i = op.FUNCTION.weight_operand
    if i is not None and (fmt := weight_format(op.operands[i])) is not None:  # the operand as the device stores it
        args = (*args[:i], device_values(args[i], fmt), *args[i + 1 :])
    return (op.FUNCTION.golden(args, forge.rule_call(op).keywords),)


def weight_format(v: SSAValue) -> FormatName | None:
    """The block float an op's weight operand (a matmul's B) is stored in:
    its weights' (`mark-weight-formats`), when it is computed from weights
    alone, as the stand-in converts such an operand."""
    formats: set[FormatName] = set()
    todo, seen = [v], set()
    while todo:  # (not recursive: an activation's chain back to the inputs may be thousands of ops)
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        op = v.owner
        if isinstance(op, forge.ParameterOp | forge.ConstantOp):
            if op.weight_format is not None:
                formats.add(FormatName(op.weight_format.data))
        elif isinstance(op, Operation) and op.operands:
            todo.extend(op.operands)
        else:  # an input: not made of weights
            return None
    return next(iter(formats)) if len(formats) == 1 else None


def fill_array(op: forge.ConstantOp) -> np.ndarray:
    t = dtypes.tensor(op.output.type)
    return np.full(t.get_shape(), fill_value(op.fill), dtypes.numpy_dtype(t.element_type))


def laid_out(array: np.ndarray, steps) -> np.ndarray:
    """A weight as its parameter's `layout` steps leave it."""
    for kind, ints in steps:
        array = array.transpose(ints) if kind == "transpose" else array.reshape(ints)
    return array


def run_parameter(self, interp: Interpreter, op: forge.ParameterOp, args: tuple) -> tuple:
    return (laid_out(attr_to_array(op.value), op.steps()),)


def run_constant(self, interp: Interpreter, op: forge.ConstantOp, args: tuple) -> tuple:
    return (attr_to_array(op.value) if op.value is not None else fill_array(op),)


ForgeFunctions = register_impls(
    type(
        "ForgeFunctions",
        (InterpreterFunctions,),
        {
            "run_parameter": impl(forge.ParameterOp)(run_parameter),
            "run_constant": impl(forge.ConstantOp)(run_constant),
            **{f"run_{cls.FUNCTION.name}": impl(cls)(run_forge_op) for cls in forge.OPS},
        },
    )
)
