"""The `tir` builder of the ONNX lowerings (onnx-mlir's `MathBuilder`, on
the lowering's emitter): each method adds one op next to the node being
lowered and gives its value; an operand without static sizes is an error
naming that node. The lowering families share these methods, never one
another's modules (`tests/test_import_graph.py`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import Emitter, as_ints, static_shape

#: float32 values from here on are integers (and infinities): rounding leaves them
_INTEGRAL_FROM = float(2**23)


class TirEmitter(Emitter):
    def constant(self, array: np.ndarray) -> SSAValue:
        return self.value(tir.ConstantOp(array_to_attr(array)))

    def scalar(self, value: float, like: SSAValue) -> SSAValue:
        """A 0-d constant of `like`'s element type."""
        dtype = dtypes.numpy_dtype(dtypes.tensor(like.type).element_type)
        return self.constant(np.asarray(value, dtype=dtype))

    def sized(self, *values: SSAValue) -> None:
        """Each value has static sizes, or the error names the node."""
        for v in values:
            static_shape(v, self)

    def unary(self, fn: UnaryFn, x: SSAValue) -> SSAValue:
        self.sized(x)
        return self.value(tir.UnaryOp(fn, x))

    def binary(self, fn: BinaryFn, a: SSAValue, b: SSAValue) -> SSAValue:
        self.sized(a, b)
        return self.value(tir.BinaryOp(fn, a, b))

    def floor(self, x: SSAValue) -> SSAValue:
        """x - mod(x, 1): numpy's and PyTorch's remainder takes the divisor's sign."""
        return self.binary(BinaryFn.SUB, x, self.binary(BinaryFn.MOD, x, self.scalar(1.0, x)))

    def cast_like(self, x: SSAValue, like: SSAValue) -> SSAValue:
        """x cast to `like`'s element type (x itself when it has it)."""
        self.sized(x)
        element_type = dtypes.tensor(like.type).element_type
        if dtypes.tensor(x.type).element_type == element_type:
            return x
        return self.value(tir.CastOp(x, element_type))

    def reshape(self, x: SSAValue, shape: list[int]) -> SSAValue:
        """x with `shape` (x itself when it has it)."""
        if static_shape(x, self) == list(shape):
            return x
        return self.value(tir.ReshapeOp(x, shape))

    def transpose(self, x: SSAValue, perm: Sequence[int]) -> SSAValue:
        self.sized(x)
        return self.value(tir.TransposeOp(x, perm))

    def slice(self, x: SSAValue, axes: Sequence[int], begin: Sequence[int], end: Sequence[int],
              strides: Sequence[int]) -> SSAValue:
        self.sized(x)
        return self.value(tir.StridedSliceOp(x, axes, begin, end, strides))

    def concat(self, values: Sequence[SSAValue], axis: int) -> SSAValue:
        self.sized(*values)
        return self.value(tir.ConcatOp(values, axis))

    def gather(self, x: SSAValue, indices: SSAValue, axis: int) -> SSAValue:
        self.sized(x, indices)
        return self.value(tir.GatherOp(x, indices, axis))

    def where(self, condition: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        self.sized(condition, x, y)
        return self.value(tir.WhereOp(condition, x, y))

    def matmul(self, a: SSAValue, b: SSAValue) -> SSAValue:
        """numpy's matmul: a 1-D operand is a row (or column) dropped after."""
        sa, sb = static_shape(a, self), static_shape(b, self)
        if len(sa) == 1 or len(sb) == 1:
            a2 = self.value(tir.ReshapeOp(a, [1, sa[0]])) if len(sa) == 1 else a
            b2 = self.value(tir.ReshapeOp(b, [sb[0], 1])) if len(sb) == 1 else b
            y = self.matmul(a2, b2)
            out = static_shape(y, self)
            out = out[:-2] + ([] if len(sa) == 1 else [out[-2]]) + ([] if len(sb) == 1 else [out[-1]])
            return self.value(tir.ReshapeOp(y, out))
        return self.value(tir.MatmulOp(a, b))

    def reduce(self, fn: ReduceFn, x: SSAValue, axes, keepdims: bool) -> SSAValue:
        shape = static_shape(x, self)
        return self.value(tir.ReduceOp(fn, x, sorted({a % len(shape) for a in axes}), keepdims))

    def required_constant(self, value: SSAValue, what: str) -> np.ndarray:
        """The compile-time value of an input Forge needs static."""
        array = constant_array(value)
        if array is None:
            raise self.error(f"the '{what}' input must be a compile-time constant")
        return array

    def constant_ints(self, value: SSAValue, what: str) -> list[int]:
        return as_ints(self.required_constant(value, what))

    def round_half_even(self, x: SSAValue) -> SSAValue:
        """floor(x), plus one above a half, plus the floor's parity at exactly a
        half; every step is exact in floating point. Values already integral
        (|x| >= 2^23, infinities) pass through."""
        f = self.floor(x)
        d = self.binary(BinaryFn.SUB, x, f)
        up = self.cast_like(self.binary(BinaryFn.GT, d, self.scalar(0.5, x)), x)
        tie = self.cast_like(self.binary(BinaryFn.EQ, d, self.scalar(0.5, x)), x)
        odd = self.binary(BinaryFn.MOD, f, self.scalar(2.0, x))
        rounded = self.binary(BinaryFn.ADD, self.binary(BinaryFn.ADD, f, up), self.binary(BinaryFn.MUL, tie, odd))
        small = self.binary(BinaryFn.LT, self.unary(UnaryFn.ABS, x), self.scalar(_INTEGRAL_FROM, x))
        return self.where(small, rounded, x)
