"""Lowerings of ONNX's constants and element-wise ops to `tir`."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import (
    AnyFloat,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f32,
)
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.onnx import INITIALIZER_ATTR
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import Emitter, LoweringTable, static_shape

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def scalar(e: Emitter, value: float, like: SSAValue) -> SSAValue:
    """A 0-d constant of `like`'s element type."""
    dtype = dtypes.numpy_dtype(dtypes.tensor(like.type).element_type)
    return e.value(tir.ConstantOp(array_to_attr(np.asarray(value, dtype=dtype))))


def constant(e: Emitter, array: np.ndarray) -> SSAValue:
    return e.value(tir.ConstantOp(array_to_attr(array)))


@lowers(onnx.ConstantOp)
def _constant(op: onnx.ConstantOp, e: Emitter):
    name = op.attributes.get(INITIALIZER_ATTR)
    if op.value is not None:
        return [e.value(tir.ConstantOp(op.value, name.data if isinstance(name, StringAttr) else None))]
    for number, dtype in ((op.value_float, np.float32), (op.value_int, np.int64)):
        if number is not None:
            return [constant(e, np.asarray(number.value.data, dtype))]
    for numbers, dtype in ((op.value_floats, np.float32), (op.value_ints, np.int64)):
        if numbers is not None:
            return [constant(e, np.asarray(list(numbers.get_values()), dtype))]
    raise e.error("only tensor, float and int constants can be lowered")


#: No filled tensor larger than this is emitted: more than any Tenstorrent
#: device's memory (24 GB on a Wormhole n300, 32 GB on a Blackhole p150), so a
#: larger size is a model bug (a shape computed from garbage), not a tensor.
LARGEST_FILL_BYTES = 1 << 36


@lowers(onnx.ConstantOfShapeOp)
def _constant_of_shape(op: onnx.ConstantOfShapeOp, e: Emitter):
    shape = constant_array(op.input)
    if shape is None:
        raise e.error("the shape input must be a compile-time constant")
    dims = [int(d) for d in shape.reshape(-1)]
    if any(d < 0 for d in dims):
        raise e.error(f"the shape {dims} has a negative size")
    value = op.value
    if value is None:
        fill, elem = FloatAttr(0.0, f32), f32
    else:
        if not isinstance(value, DenseIntOrFPElementsAttr):
            raise e.error(f"the value must be a tensor, not {value}")
        v = attr_to_array(value).reshape(-1)[0]
        elem = value.get_element_type()
        if isinstance(elem, IntegerType):
            fill = IntegerAttr(int(v), elem)
        elif isinstance(elem, AnyFloat):
            fill = FloatAttr(float(v), elem)
        else:
            raise e.error(f"a fill of type {elem} is not supported")
    size = math.prod(dims) * dtypes.numpy_dtype(elem).itemsize
    if size > LARGEST_FILL_BYTES:
        raise e.error(
            f"the shape {dims} makes a tensor of {size:,} bytes, more than any device holds "
            f"({LARGEST_FILL_BYTES:,} bytes)"
        )
    return [e.value(tir.FullOp(fill, TensorType(elem, dims)))]


@lowers(onnx.IdentityOp)
def _identity(op: onnx.IdentityOp, e: Emitter):
    return [op.input]


@lowers(onnx.DropoutOp)
def _dropout(op: onnx.DropoutOp, e: Emitter):
    # Inference: the identity; the mask is all true.
    training = None if op.training_mode is None else constant_array(op.training_mode)
    if training is not None and bool(training.reshape(-1)[0]):
        raise e.error("training_mode=true is not supported for inference")
    results = [op.data]
    if op.mask is not None:
        shape = static_shape(op.data, e)
        results.append(constant(e, np.ones(shape, dtype=bool)))
    return results


_UNARY = {
    onnx.AbsOp: UnaryFn.ABS, onnx.AtanOp: UnaryFn.ATAN, onnx.CosOp: UnaryFn.COS, onnx.ErfOp: UnaryFn.ERF,
    onnx.ExpOp: UnaryFn.EXP, onnx.LogOp: UnaryFn.LOG, onnx.NegOp: UnaryFn.NEG, onnx.NotOp: UnaryFn.NOT,
    onnx.ReciprocalOp: UnaryFn.RECIPROCAL, onnx.ReluOp: UnaryFn.RELU, onnx.SigmoidOp: UnaryFn.SIGMOID,
    onnx.SinOp: UnaryFn.SIN, onnx.SqrtOp: UnaryFn.SQRT, onnx.TanhOp: UnaryFn.TANH,
}


@lowers(*_UNARY)
def _unary(op, e):
    return [unary(e, _UNARY[type(op)], op.operands[0])]


@lowers(onnx.GeluOp)
def _gelu(op: onnx.GeluOp, e: Emitter):
    return [unary(e, UnaryFn.GELU_TANH if op.approximate.data == "tanh" else UnaryFn.GELU, op.X)]


_BINARY = {
    onnx.AddOp: BinaryFn.ADD, onnx.SubOp: BinaryFn.SUB, onnx.MulOp: BinaryFn.MUL, onnx.DivOp: BinaryFn.DIV,
    onnx.PowOp: BinaryFn.POW, onnx.EqualOp: BinaryFn.EQ, onnx.AndOp: BinaryFn.AND, onnx.OrOp: BinaryFn.OR,
    onnx.XorOp: BinaryFn.NE, onnx.GreaterOp: BinaryFn.GT, onnx.GreaterOrEqualOp: BinaryFn.GE,
    onnx.LessOp: BinaryFn.LT, onnx.LessOrEqualOp: BinaryFn.LE,
}


def binary(e: Emitter, fn: BinaryFn, a: SSAValue, b: SSAValue) -> SSAValue:
    static_shape(a, e)
    static_shape(b, e)
    return e.value(tir.BinaryOp(fn, a, b))


def unary(e: Emitter, fn: UnaryFn, x: SSAValue) -> SSAValue:
    static_shape(x, e)
    return e.value(tir.UnaryOp(fn, x))


@lowers(*_BINARY)
def _binary(op, e):
    a, b = op.operands
    return [binary(e, _BINARY[type(op)], a, b)]


@lowers(onnx.MaxOp, onnx.MinOp, onnx.SumOp)
def _variadic(op: onnx.MaxOp | onnx.MinOp | onnx.SumOp, e: Emitter):
    fn = {onnx.MaxOp: BinaryFn.MAX, onnx.MinOp: BinaryFn.MIN, onnx.SumOp: BinaryFn.ADD}[type(op)]
    value = op.operands[0]
    for other in op.operands[1:]:
        value = binary(e, fn, value, other)
    return [value]


@lowers(onnx.MeanOp)
def _mean(op: onnx.MeanOp, e: Emitter):
    value = op.operands[0]
    for other in op.operands[1:]:
        value = binary(e, BinaryFn.ADD, value, other)
    return [binary(e, BinaryFn.DIV, value, scalar(e, len(op.operands), value))]


@lowers(onnx.ModOp)
def _mod(op: onnx.ModOp, e: Emitter):
    if op.fmod.value.data:
        # C's fmod takes the dividend's sign: mod(|a|, |b|) with a's sign.
        magnitude = binary(e, BinaryFn.MOD, unary(e, UnaryFn.ABS, op.A), unary(e, UnaryFn.ABS, op.B))
        negative = binary(e, BinaryFn.LT, op.A, scalar(e, 0, op.A))
        return [_where_values(e, negative, unary(e, UnaryFn.NEG, magnitude), magnitude)]
    return [binary(e, BinaryFn.MOD, op.A, op.B)]


@lowers(onnx.LeakyReluOp)
def _leaky_relu(op: onnx.LeakyReluOp, e: Emitter):
    alpha = op.alpha.value.data
    if not 0 <= alpha <= 1:
        raise e.error(f"alpha {alpha} outside [0, 1] is not supported")
    return [binary(e, BinaryFn.MAX, op.X, binary(e, BinaryFn.MUL, op.X, scalar(e, alpha, op.X)))]


@lowers(onnx.WhereOp)
def _where(op: onnx.WhereOp, e: Emitter):
    return [_where_values(e, op.condition, op.X, op.Y)]


@lowers(onnx.CastOp)
def _cast(op: onnx.CastOp, e: Emitter):
    to = dtypes.mlir_type(op.to.value.data)
    if to is None:
        raise e.error(f"cast to {dtypes.onnx_name(op.to.value.data)} is not supported")
    static_shape(op.input, e)
    return [e.value(tir.CastOp(op.input, to))]


@lowers(onnx.ClipOp)
def _clip(op: onnx.ClipOp, e: Emitter):
    info = np.finfo(np.float32)
    if any(v is not None and constant_array(v) is None for v in (op.min, op.max)):
        # a bound computed at run time (a mel front end's ReduceMax(x) - 80): ONNX's min(max(x, lo), hi)
        y = op.input
        if op.min is not None:
            y = binary(e, BinaryFn.MAX, y, op.min)
        if op.max is not None:
            y = binary(e, BinaryFn.MIN, y, op.max)
        return [y]
    bounds = []
    for value, default in ((op.min, float(info.min)), (op.max, float(info.max))):
        array = None if value is None else constant_array(value)
        bounds.append(default if array is None else float(array.reshape(-1)[0]))
    return [e.value(tir.ClipOp(op.input, *bounds))]


# -- activations that are compositions of element-wise ops ---------------------


@lowers(onnx.HardSigmoidOp)
def _hard_sigmoid(op: onnx.HardSigmoidOp, e: Emitter):
    x = op.X
    scaled = binary(e, BinaryFn.MUL, x, scalar(e, op.alpha.value.data, x))
    y = binary(e, BinaryFn.ADD, scaled, scalar(e, op.beta.value.data, x))
    return [binary(e, BinaryFn.MIN, binary(e, BinaryFn.MAX, y, scalar(e, 0.0, x)), scalar(e, 1.0, x))]


@lowers(onnx.HardSwishOp)
def _hard_swish(op: onnx.HardSwishOp, e: Emitter):
    x = op.X
    y = binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, x, scalar(e, 1 / 6, x)), scalar(e, 0.5, x))
    gate = binary(e, BinaryFn.MIN, binary(e, BinaryFn.MAX, y, scalar(e, 0.0, x)), scalar(e, 1.0, x))
    return [binary(e, BinaryFn.MUL, x, gate)]


def _softplus_of(e, x):
    """log(1 + exp(x)), written stably: max(x, 0) + log(1 + exp(-|x|))."""
    neg_abs = unary(e, UnaryFn.NEG, unary(e, UnaryFn.ABS, x))
    tail = unary(e, UnaryFn.LOG, binary(e, BinaryFn.ADD, unary(e, UnaryFn.EXP, neg_abs), scalar(e, 1.0, x)))
    return binary(e, BinaryFn.ADD, unary(e, UnaryFn.RELU, x), tail)


@lowers(onnx.SoftplusOp)
def _softplus(op: onnx.SoftplusOp, e: Emitter):
    return [_softplus_of(e, op.X)]


@lowers(onnx.SoftsignOp)
def _softsign(op: onnx.SoftsignOp, e: Emitter):
    x = op.input
    return [binary(e, BinaryFn.DIV, x, binary(e, BinaryFn.ADD, unary(e, UnaryFn.ABS, x), scalar(e, 1.0, x)))]


@lowers(onnx.MishOp)
def _mish(op: onnx.MishOp, e: Emitter):
    return [binary(e, BinaryFn.MUL, op.X, unary(e, UnaryFn.TANH, _softplus_of(e, op.X)))]


def _elu_of(e, x, alpha):
    """alpha * (exp(min(x, 0)) - 1) + relu(x)"""
    negative = binary(e, BinaryFn.MIN, x, scalar(e, 0.0, x))
    expm1 = binary(e, BinaryFn.SUB, unary(e, UnaryFn.EXP, negative), scalar(e, 1.0, x))
    return binary(e, BinaryFn.ADD, unary(e, UnaryFn.RELU, x), binary(e, BinaryFn.MUL, expm1, scalar(e, alpha, x)))


@lowers(onnx.EluOp)
def _elu(op: onnx.EluOp, e: Emitter):
    return [_elu_of(e, op.X, op.alpha.value.data)]


@lowers(onnx.CeluOp)
def _celu(op: onnx.CeluOp, e: Emitter):
    alpha = op.alpha.value.data
    x = binary(e, BinaryFn.DIV, op.X, scalar(e, alpha, op.X))
    negative = binary(e, BinaryFn.MIN, x, scalar(e, 0.0, x))
    expm1 = binary(e, BinaryFn.SUB, unary(e, UnaryFn.EXP, negative), scalar(e, 1.0, x))
    return [binary(e, BinaryFn.ADD, unary(e, UnaryFn.RELU, op.X), binary(e, BinaryFn.MUL, expm1, scalar(e, alpha, x)))]


@lowers(onnx.SeluOp)
def _selu(op: onnx.SeluOp, e: Emitter):
    elu = _elu_of(e, op.X, op.alpha.value.data)
    return [binary(e, BinaryFn.MUL, elu, scalar(e, op.gamma.value.data, op.X))]


@lowers(onnx.ThresholdedReluOp)
def _thresholded_relu(op: onnx.ThresholdedReluOp, e: Emitter):
    x = op.X
    keep = binary(e, BinaryFn.GT, x, scalar(e, op.alpha.value.data, x))
    return [_where_values(e, keep, x, scalar(e, 0.0, x))]


@lowers(onnx.PReluOp)
def _prelu(op: onnx.PReluOp, e: Emitter):
    x, slope = op.X, op.slope
    negative = binary(e, BinaryFn.MUL, binary(e, BinaryFn.MIN, x, scalar(e, 0.0, x)), slope)
    return [binary(e, BinaryFn.ADD, unary(e, UnaryFn.RELU, x), negative)]


@lowers(onnx.SwishOp)
def _swish(op: onnx.SwishOp, e: Emitter):
    x = op.X
    scaled = binary(e, BinaryFn.MUL, x, scalar(e, op.alpha.value.data, x))
    return [binary(e, BinaryFn.MUL, x, unary(e, UnaryFn.SIGMOID, scaled))]


@lowers(onnx.TanOp)
def _tan(op: onnx.TanOp, e: Emitter):
    return [binary(e, BinaryFn.DIV, unary(e, UnaryFn.SIN, op.input), unary(e, UnaryFn.COS, op.input))]


@lowers(onnx.SinhOp, onnx.CoshOp)
def _hyperbolic(op: onnx.SinhOp | onnx.CoshOp, e: Emitter):
    x = op.input
    fn = BinaryFn.SUB if isinstance(op, onnx.SinhOp) else BinaryFn.ADD
    both = binary(e, fn, unary(e, UnaryFn.EXP, x), unary(e, UnaryFn.EXP, unary(e, UnaryFn.NEG, x)))
    return [binary(e, BinaryFn.MUL, both, scalar(e, 0.5, x))]


@lowers(onnx.IsNaNOp)
def _isnan(op: onnx.IsNaNOp, e: Emitter):
    return [binary(e, BinaryFn.NE, op.X, op.X)]


@lowers(onnx.CastLikeOp)
def _cast_like(op: onnx.CastLikeOp, e: Emitter):
    return [cast_like(e, op.input, op.target_type)]


def _where_values(e, condition, x, y):
    for v in (condition, x, y):
        static_shape(v, e)
    return e.value(tir.WhereOp(condition, x, y))


def floor_of(e, x):
    """x - mod(x, 1): numpy's and PyTorch's remainder takes the divisor's sign."""
    return binary(e, BinaryFn.SUB, x, binary(e, BinaryFn.MOD, x, scalar(e, 1.0, x)))


@lowers(onnx.FloorOp)
def _floor(op: onnx.FloorOp, e: Emitter):
    return [floor_of(e, op.X)]


@lowers(onnx.CeilOp)
def _ceil(op: onnx.CeilOp, e: Emitter):
    return [unary(e, UnaryFn.NEG, floor_of(e, unary(e, UnaryFn.NEG, op.X)))]


def cast_like(e: Emitter, x: SSAValue, like: SSAValue) -> SSAValue:
    """x cast to `like`'s element type (x itself when it has it)."""
    static_shape(x, e)
    element_type = dtypes.tensor(like.type).element_type
    if dtypes.tensor(x.type).element_type == element_type:
        return x
    return e.value(tir.CastOp(x, element_type))


@lowers(onnx.SignOp)
def _sign(op: onnx.SignOp, e: Emitter):
    x = op.input
    positive = cast_like(e, binary(e, BinaryFn.GT, x, scalar(e, 0, x)), x)
    negative = cast_like(e, binary(e, BinaryFn.LT, x, scalar(e, 0, x)), x)
    return [binary(e, BinaryFn.SUB, positive, negative)]


@lowers(onnx.IsInfOp)
def _isinf(op: onnx.IsInfOp, e: Emitter):
    x = op.X
    pos, neg = op.detect_positive.value.data, op.detect_negative.value.data
    if pos and neg:
        return [binary(e, BinaryFn.EQ, unary(e, UnaryFn.ABS, x), scalar(e, np.inf, x))]
    if pos:
        return [binary(e, BinaryFn.EQ, x, scalar(e, np.inf, x))]
    if neg:
        return [binary(e, BinaryFn.EQ, x, scalar(e, -np.inf, x))]
    return [binary(e, BinaryFn.LT, x, scalar(e, -np.inf, x))]  # detects nothing: all false


def _sqrt_of(e, x):
    return unary(e, UnaryFn.SQRT, x)


def _asin_of(e, x):
    """atan(x / sqrt(1 - x^2))"""
    root = _sqrt_of(e, binary(e, BinaryFn.SUB, scalar(e, 1.0, x), binary(e, BinaryFn.MUL, x, x)))
    return unary(e, UnaryFn.ATAN, binary(e, BinaryFn.DIV, x, root))


@lowers(onnx.AsinOp)
def _asin(op: onnx.AsinOp, e: Emitter):
    return [_asin_of(e, op.input)]


@lowers(onnx.AcosOp)
def _acos(op: onnx.AcosOp, e: Emitter):
    return [binary(e, BinaryFn.SUB, scalar(e, np.pi / 2, op.input), _asin_of(e, op.input))]


@lowers(onnx.AcoshOp)
def _acosh(op: onnx.AcoshOp, e: Emitter):
    x = op.input
    root = _sqrt_of(e, binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, x, x), scalar(e, -1.0, x)))
    return [unary(e, UnaryFn.LOG, binary(e, BinaryFn.ADD, x, root))]


@lowers(onnx.AsinhOp)
def _asinh(op: onnx.AsinhOp, e: Emitter):
    # odd: computed on |x|, as x + sqrt(x^2 + 1) cancels to 0 for large negative x
    x = op.input
    a = unary(e, UnaryFn.ABS, x)
    root = _sqrt_of(e, binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, a, a), scalar(e, 1.0, x)))
    y = unary(e, UnaryFn.LOG, binary(e, BinaryFn.ADD, a, root))
    negative = binary(e, BinaryFn.LT, x, scalar(e, 0.0, x))
    return [_where_values(e, negative, unary(e, UnaryFn.NEG, y), y)]


@lowers(onnx.AtanhOp)
def _atanh(op: onnx.AtanhOp, e: Emitter):
    x = op.input
    one = scalar(e, 1.0, x)
    ratio = binary(e, BinaryFn.DIV, binary(e, BinaryFn.ADD, one, x), binary(e, BinaryFn.SUB, one, x))
    return [binary(e, BinaryFn.MUL, unary(e, UnaryFn.LOG, ratio), scalar(e, 0.5, x))]


@lowers(onnx.ShrinkOp)
def _shrink(op: onnx.ShrinkOp, e: Emitter):
    x = op.input
    lambd, bias = op.lambd.value.data, op.bias.value.data
    below = binary(e, BinaryFn.LT, x, scalar(e, -lambd, x))
    above = binary(e, BinaryFn.GT, x, scalar(e, lambd, x))
    zero = scalar(e, 0, x)
    upper = _where_values(e, above, binary(e, BinaryFn.SUB, x, scalar(e, bias, x)), zero)
    return [_where_values(e, below, binary(e, BinaryFn.ADD, x, scalar(e, bias, x)), upper)]
