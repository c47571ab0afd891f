"""numpy implementations of the `tir` ops."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt.dialects import tir


@register_impls
class TirFunctions(InterpreterFunctions):
    @impl(tir.SplitOp)
    def run_split(self, interp: Interpreter, op: tir.SplitOp, args: tuple):
        bounds = np.cumsum(op.sections.get_values())[:-1]
        return tuple(np.split(args[0], bounds, axis=op.axis.value.data))

    @impl(tir.StridedSliceOp)
    def run_strided_slice(self, interp: Interpreter, op: tir.StridedSliceOp, args: tuple):
        x = args[0]
        index = [slice(None)] * x.ndim
        for axis, begin, end, stride in op.slices():
            index[axis] = slice(begin, end, stride)
        return (x[tuple(index)],)
