"""numpy implementations of the `forge` ops, through `forge_kernels`."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt import dtypes
from forge_opt.dialects import forge
from forge_opt.dialects.elements import attr_to_array, fill_value
from forge_opt.interpreters.forge_kernels import evaluate


def run_forge_op(self, interp: Interpreter, op: forge.ForgeOp, args: tuple) -> tuple:
    return (evaluate(op.FORGE_FUNCTION, args, forge.rule_call(op).keywords),)


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
            **{f"run_{name}": impl(cls)(run_forge_op) for name, cls in forge.FORGE_OPS.items()},
        },
    )
)
