"""numpy implementations of the `onnx` ops that forge-opt lowers."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx


def elements_to_array(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """A read-only view of an elements attribute's bytes."""
    dtype = dtypes.numpy_dtype(attr.get_element_type())
    return np.frombuffer(attr.data.data, dtype).reshape(attr.get_shape())


@register_impls
class OnnxFunctions(InterpreterFunctions):
    @impl(onnx.ConstantOp)
    def run_constant(self, interp: Interpreter, op: onnx.ConstantOp, args: tuple):
        return (elements_to_array(op.value),)

    @impl(onnx.SplitOp)
    def run_split(self, interp: Interpreter, op: onnx.SplitOp, args: tuple):
        x = args[0]
        axis = op.axis.value.data % x.ndim
        count = len(op.outputs)
        if len(args) > 1:
            sizes = [int(s) for s in np.asarray(args[1]).reshape(-1)]
        elif op.num_outputs is not None:
            size = -(-x.shape[axis] // count)
            sizes = [min(size, x.shape[axis] - i * size) for i in range(count)]
        else:
            sizes = [x.shape[axis] // count] * count
        bounds = np.cumsum(sizes)[:-1]
        return tuple(np.split(x, bounds, axis=axis))
