"""The `tir` builder of the ONNX lowerings (onnx-mlir's `MathBuilder`, on
the lowering's emitter): each method adds one op next to the node being
lowered and gives its value; an operand without static sizes is an error
naming that node."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.lowering import Emitter, static_shape


class TirEmitter(Emitter):
    def constant(self, array: np.ndarray) -> SSAValue:
        return self.value(tir.ConstantOp(array_to_attr(array)))

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A 0-d constant of `like`'s element type."""
        dtype = dtypes.numpy_dtype(dtypes.tensor(like.type).element_type)
        return self.constant(np.asarray(value, dtype=dtype))

    def unary(self, fn: UnaryFn, x: SSAValue) -> SSAValue:
        static_shape(x, self)
        return self.value(tir.UnaryOp(fn, x))

    def binary(self, fn: BinaryFn, a: SSAValue, b: SSAValue) -> SSAValue:
        static_shape(a, self)
        static_shape(b, self)
        return self.value(tir.BinaryOp(fn, a, b))

    def floor(self, x: SSAValue) -> SSAValue:
        """x - mod(x, 1): numpy's and PyTorch's remainder takes the divisor's sign."""
        return self.binary(BinaryFn.SUB, x, self.binary(BinaryFn.MOD, x, self.scalar(1.0, x)))

    def cast_like(self, x: SSAValue, like: SSAValue) -> SSAValue:
        """x cast to `like`'s element type (x itself when it has it)."""
        static_shape(x, self)
        element_type = dtypes.tensor(like.type).element_type
        if dtypes.tensor(x.type).element_type == element_type:
            return x
        return self.value(tir.CastOp(x, element_type))
