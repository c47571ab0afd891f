"""Rounding and linear quantization in exact arithmetic: `Round` (half to
even, as ONNX and numpy round), `QuantizeLinear` and `DequantizeLinear`
(per tensor, per axis and blocked), `MatMulInteger` and `QLinearMatMul`. Forge has no rounding or quantize op of
its own, so these are compositions of ops it has."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerType, Signedness, f32
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.lowering import LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

#: From this magnitude on every float32 is an integer (and infinities and
#: NaN round to themselves).


@lowers(onnx.RoundOp)
def _round(op: onnx.RoundOp, e: TirEmitter):
    static_shape(op.X, e)
    return [e.round_half_even(op.X)]


def _broadcast_param(e: TirEmitter, param: SSAValue, shape: list[int], axis: int, block: int, what: str) -> SSAValue:
    """A scale or zero point shaped to broadcast against the input: a scalar
    as it is, one value per index of `axis`, or (blocked) one per `block`
    indices of `axis`, repeated. `axis` is read only in the last two cases."""
    p = static_shape(param, e, what)
    rank = len(shape)
    if len(p) == 0 or (len(p) == 1 and p[0] == 1 and block == 0):
        return param
    axis = normalize_axis(axis, rank, e)
    if block == 0:
        if len(p) != 1 or p[0] != shape[axis]:
            raise e.error(f"the {what} has shape {p}; per-axis quantization along axis {axis} needs [{shape[axis]}]")
        target = [shape[axis] if a == axis else 1 for a in range(rank)]
        return e.reshape(param, target)
    blocks = -(-shape[axis] // block)
    expected = [blocks if a == axis else d for a, d in enumerate(shape)]
    if p != expected:
        raise e.error(f"the {what} has shape {p}; blocks of {block} along axis {axis} need {expected}")
    which = (np.arange(shape[axis]) // block).astype(np.int64)
    return e.gather(param, e.constant(which), axis)


def _params(op, e: TirEmitter, x: SSAValue, scale: SSAValue, zero: SSAValue | None):
    shape = static_shape(x, e)
    axis = op.axis.value.data
    block = op.block_size.value.data
    s = _broadcast_param(e, scale, shape, axis, block, "scale")
    z = None if zero is None else _broadcast_param(e, zero, shape, axis, block, "zero point")
    return s, z


@lowers(onnx.DequantizeLinearOp)
def _dequantize(op: onnx.DequantizeLinearOp, e: TirEmitter):
    """(x - zero_point) * scale, in the scale's type."""
    scale, zero = _params(op, e, op.x, op.x_scale, op.x_zero_point)
    x = e.cast_like(op.x, scale)
    if zero is not None:
        x = e.binary(BinaryFn.SUB, x, e.cast_like(zero, scale))
    y = e.binary(BinaryFn.MUL, x, scale)
    out = dtypes.tensor(op.y.type).element_type
    return [y if out == dtypes.tensor(y.type).element_type else e.value(tir.CastOp(y, out))]


@lowers(onnx.QuantizeLinearOp)
def _quantize(op: onnx.QuantizeLinearOp, e: TirEmitter):
    """saturate(round_half_even(x / scale) + zero_point) in the output's integer type."""
    out = dtypes.tensor(op.y.type).element_type
    if not isinstance(out, IntegerType):
        raise e.error(f"quantizing to {out} is not supported (integer outputs only)")
    scale, zero = _params(op, e, op.x, op.y_scale, op.y_zero_point)
    x = op.x
    if dtypes.tensor(x.type).element_type != dtypes.tensor(scale.type).element_type:
        x = e.cast_like(x, scale)
    y = e.round_half_even(e.binary(BinaryFn.DIV, x, scale))
    if zero is not None:
        y = e.binary(BinaryFn.ADD, y, e.cast_like(zero, y))
    return [_saturate(e, y, out)]


def _saturate(e: TirEmitter, y: SSAValue, out: IntegerType) -> SSAValue:
    """y clipped to the integer type's range, cast to it."""
    bits = out.width.data
    unsigned = out.signedness.data == Signedness.UNSIGNED
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return e.value(tir.CastOp(e.value(tir.ClipOp(y, float(low), float(high))), out))




#: float32 holds every integer below 2^24: a dot product of 8-bit values
#: (each below 2^8 in magnitude after the zero point) is exact in float32
#: over at most this many terms, so longer ones are summed in int32 by parts.
_EXACT_TERMS = 2**24 // (255 * 255)


def integer_matmul(
    e: TirEmitter, a: SSAValue, b: SSAValue, a_zero: SSAValue | None, b_zero: SSAValue | None
) -> SSAValue:
    """(a - a_zero) @ (b - b_zero) exactly, as int32: float32 Matmuls over
    parts of the summed axis short enough to be exact, cast and added.
    a_zero is a scalar or one per row of a ([M])."""
    i32 = IntegerType(32)
    fa = e.value(tir.CastOp(a, f32))
    fb = e.value(tir.CastOp(b, f32))
    if a_zero is not None:
        zero = e.cast_like(a_zero, fa)
        rows = static_shape(zero, e, "a_zero_point")
        if len(rows) == 1 and rows[0] != 1:  # one per row of a: [M] along a's rows, not its columns
            zero = e.reshape(zero, [rows[0], 1])
        fa = e.binary(BinaryFn.SUB, fa, zero)
    if b_zero is not None:
        fb = e.binary(BinaryFn.SUB, fb, e.cast_like(b_zero, fb))
    a_shape, b_shape = static_shape(fa, e), static_shape(fb, e)
    k = a_shape[-1]
    total = None
    for start in range(0, k, _EXACT_TERMS):
        stop = min(k, start + _EXACT_TERMS)
        pa = fa if (start, stop) == (0, k) else e.value(
            tir.StridedSliceOp(fa, [len(a_shape) - 1], [start], [stop], [1])
        )
        pb = fb if (start, stop) == (0, k) else e.value(
            tir.StridedSliceOp(fb, [len(b_shape) - 2], [start], [stop], [1])
        )
        part = e.value(tir.CastOp(e.matmul(pa, pb), i32))
        total = part if total is None else e.binary(BinaryFn.ADD, total, part)
    assert total is not None
    return total


@lowers(onnx.MatMulIntegerOp)
def _matmul_integer(op: onnx.MatMulIntegerOp, e: TirEmitter):
    return [integer_matmul(e, op.A, op.B, op.a_zero_point, op.b_zero_point)]


@lowers(onnx.QLinearMatMulOp)
def _qlinear_matmul(op: onnx.QLinearMatMulOp, e: TirEmitter):
    """The exact integer product, scaled by a_scale * b_scale / y_scale,
    rounded half to even, shifted by y_zero_point and saturated."""
    out = dtypes.tensor(op.y.type).element_type
    if not isinstance(out, IntegerType):
        raise e.error(f"a {out} result is not supported (integer results only)")
    for scale in (op.a_scale, op.b_scale, op.y_scale):
        if any(d != 1 for d in static_shape(scale, e, "scale")):
            raise e.error("per-axis scales are not supported (per-tensor only)")
    acc = e.value(tir.CastOp(integer_matmul(e, op.a, op.b, op.a_zero_point, op.b_zero_point), f32))
    scale = e.binary(BinaryFn.DIV, e.binary(BinaryFn.MUL, op.a_scale, op.b_scale), op.y_scale)
    # the scales may be float16; the float32 product is scaled in float32
    y = e.round_half_even(e.binary(BinaryFn.MUL, acc, e.cast_like(scale, acc)))
    y = e.binary(BinaryFn.ADD, y, e.cast_like(op.y_zero_point, y))
    return [_saturate(e, y, out)]
