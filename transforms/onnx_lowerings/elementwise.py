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

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.elements import attr_to_array
from forge_opt.dialects.onnx import INITIALIZER_ATTR
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers






@lowers(onnx.ConstantOp)
def _constant(op: onnx.ConstantOp, e: TirEmitter):
    name = op.attributes.get(INITIALIZER_ATTR)
    if op.value is not None:
        return [e.value(tir.ConstantOp(op.value, name.data if isinstance(name, StringAttr) else None))]
    for number, dtype in ((op.value_float, np.float32), (op.value_int, np.int64)):
        if number is not None:
            return [e.constant(np.asarray(number.value.data, dtype))]
    for numbers, dtype in ((op.value_floats, np.float32), (op.value_ints, np.int64)):
        if numbers is not None:
            return [e.constant(np.asarray(list(numbers.get_values()), dtype))]
    raise e.error("only tensor, float and int constants can be lowered")


#: No filled tensor larger than this is emitted: more than any Tenstorrent
#: device's memory (24 GB on a Wormhole n300, 32 GB on a Blackhole p150), so a
#: larger size is a model bug (a shape computed from garbage), not a tensor.
LARGEST_FILL_BYTES = 1 << 36


@lowers(onnx.ConstantOfShapeOp)
def _constant_of_shape(op: onnx.ConstantOfShapeOp, e: TirEmitter):
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
def _identity(op: onnx.IdentityOp, e: TirEmitter):
    return [op.input]


@lowers(onnx.DropoutOp)
def _dropout(op: onnx.DropoutOp, e: TirEmitter):
    # Inference: the identity; the mask is all true.
    training = None if op.training_mode is None else constant_array(op.training_mode)
    if training is not None and bool(training.reshape(-1)[0]):
        raise e.error("training_mode=true is not supported for inference")
    results = [op.data]
    if op.mask is not None:
        shape = static_shape(op.data, e)
        results.append(e.constant(np.ones(shape, dtype=bool)))
    return results


_UNARY = {
    onnx.AbsOp: UnaryFn.ABS, onnx.AtanOp: UnaryFn.ATAN, onnx.CosOp: UnaryFn.COS, onnx.ErfOp: UnaryFn.ERF,
    onnx.ExpOp: UnaryFn.EXP, onnx.LogOp: UnaryFn.LOG, onnx.NegOp: UnaryFn.NEG, onnx.NotOp: UnaryFn.NOT,
    onnx.ReciprocalOp: UnaryFn.RECIPROCAL, onnx.ReluOp: UnaryFn.RELU, onnx.SigmoidOp: UnaryFn.SIGMOID,
    onnx.SinOp: UnaryFn.SIN, onnx.SqrtOp: UnaryFn.SQRT, onnx.TanhOp: UnaryFn.TANH,
}


@lowers(*_UNARY)
def _unary(op, e):
    return [e.unary(_UNARY[type(op)], op.operands[0])]


@lowers(onnx.GeluOp)
def _gelu(op: onnx.GeluOp, e: TirEmitter):
    return [e.unary(UnaryFn.GELU_TANH if op.approximate.data == "tanh" else UnaryFn.GELU, op.X)]


_BINARY = {
    onnx.AddOp: BinaryFn.ADD, onnx.SubOp: BinaryFn.SUB, onnx.MulOp: BinaryFn.MUL, onnx.DivOp: BinaryFn.DIV,
    onnx.PowOp: BinaryFn.POW, onnx.EqualOp: BinaryFn.EQ, onnx.AndOp: BinaryFn.AND, onnx.OrOp: BinaryFn.OR,
    onnx.XorOp: BinaryFn.NE, onnx.GreaterOp: BinaryFn.GT, onnx.GreaterOrEqualOp: BinaryFn.GE,
    onnx.LessOp: BinaryFn.LT, onnx.LessOrEqualOp: BinaryFn.LE,
}






@lowers(*_BINARY)
def _binary(op, e):
    a, b = op.operands
    return [e.binary(_BINARY[type(op)], a, b)]


@lowers(onnx.MaxOp, onnx.MinOp, onnx.SumOp)
def _variadic(op: onnx.MaxOp | onnx.MinOp | onnx.SumOp, e: TirEmitter):
    fn = {onnx.MaxOp: BinaryFn.MAX, onnx.MinOp: BinaryFn.MIN, onnx.SumOp: BinaryFn.ADD}[type(op)]
    value = op.operands[0]
    for other in op.operands[1:]:
        value = e.binary(fn, value, other)
    return [value]


@lowers(onnx.MeanOp)
def _mean(op: onnx.MeanOp, e: TirEmitter):
    value = op.operands[0]
    for other in op.operands[1:]:
        value = e.binary(BinaryFn.ADD, value, other)
    return [e.binary(BinaryFn.DIV, value, e.scalar(len(op.operands), value))]


@lowers(onnx.ModOp)
def _mod(op: onnx.ModOp, e: TirEmitter):
    if op.fmod.value.data:
        # C's fmod takes the dividend's sign: mod(|a|, |b|) with a's sign.
        magnitude = e.binary(BinaryFn.MOD, e.unary(UnaryFn.ABS, op.A), e.unary(UnaryFn.ABS, op.B))
        negative = e.binary(BinaryFn.LT, op.A, e.scalar(0, op.A))
        return [_where_values(e, negative, e.unary(UnaryFn.NEG, magnitude), magnitude)]
    return [e.binary(BinaryFn.MOD, op.A, op.B)]


@lowers(onnx.LeakyReluOp)
def _leaky_relu(op: onnx.LeakyReluOp, e: TirEmitter):
    alpha = op.alpha.value.data
    if not 0 <= alpha <= 1:
        raise e.error(f"alpha {alpha} outside [0, 1] is not supported")
    return [e.binary(BinaryFn.MAX, op.X, e.binary(BinaryFn.MUL, op.X, e.scalar(alpha, op.X)))]


@lowers(onnx.WhereOp)
def _where(op: onnx.WhereOp, e: TirEmitter):
    return [_where_values(e, op.condition, op.X, op.Y)]


@lowers(onnx.CastOp)
def _cast(op: onnx.CastOp, e: TirEmitter):
    to = dtypes.mlir_type(op.to.value.data)
    if to is None:
        raise e.error(f"cast to {dtypes.onnx_name(op.to.value.data)} is not supported")
    static_shape(op.input, e)
    return [e.value(tir.CastOp(op.input, to))]


@lowers(onnx.ClipOp)
def _clip(op: onnx.ClipOp, e: TirEmitter):
    info = np.finfo(np.float32)
    if any(v is not None and constant_array(v) is None for v in (op.min, op.max)):
        # a bound computed at run time (a mel front end's ReduceMax(x) - 80): ONNX's min(max(x, lo), hi)
        y = op.input
        if op.min is not None:
            y = e.binary(BinaryFn.MAX, y, op.min)
        if op.max is not None:
            y = e.binary(BinaryFn.MIN, y, op.max)
        return [y]
    bounds = []
    for value, default in ((op.min, float(info.min)), (op.max, float(info.max))):
        array = None if value is None else constant_array(value)
        bounds.append(default if array is None else float(array.reshape(-1)[0]))
    return [e.value(tir.ClipOp(op.input, *bounds))]


# -- activations that are compositions of element-wise ops ---------------------


@lowers(onnx.HardSigmoidOp)
def _hard_sigmoid(op: onnx.HardSigmoidOp, e: TirEmitter):
    x = op.X
    scaled = e.binary(BinaryFn.MUL, x, e.scalar(op.alpha.value.data, x))
    y = e.binary(BinaryFn.ADD, scaled, e.scalar(op.beta.value.data, x))
    return [e.binary(BinaryFn.MIN, e.binary(BinaryFn.MAX, y, e.scalar(0.0, x)), e.scalar(1.0, x))]


@lowers(onnx.HardSwishOp)
def _hard_swish(op: onnx.HardSwishOp, e: TirEmitter):
    x = op.X
    y = e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, x, e.scalar(1 / 6, x)), e.scalar(0.5, x))
    gate = e.binary(BinaryFn.MIN, e.binary(BinaryFn.MAX, y, e.scalar(0.0, x)), e.scalar(1.0, x))
    return [e.binary(BinaryFn.MUL, x, gate)]


def _softplus_of(e, x):
    """log(1 + exp(x)), written stably: max(x, 0) + log(1 + exp(-|x|))."""
    neg_abs = e.unary(UnaryFn.NEG, e.unary(UnaryFn.ABS, x))
    tail = e.unary(UnaryFn.LOG, e.binary(BinaryFn.ADD, e.unary(UnaryFn.EXP, neg_abs), e.scalar(1.0, x)))
    return e.binary(BinaryFn.ADD, e.unary(UnaryFn.RELU, x), tail)


@lowers(onnx.SoftplusOp)
def _softplus(op: onnx.SoftplusOp, e: TirEmitter):
    return [_softplus_of(e, op.X)]


@lowers(onnx.SoftsignOp)
def _softsign(op: onnx.SoftsignOp, e: TirEmitter):
    x = op.input
    return [e.binary(BinaryFn.DIV, x, e.binary(BinaryFn.ADD, e.unary(UnaryFn.ABS, x), e.scalar(1.0, x)))]


@lowers(onnx.MishOp)
def _mish(op: onnx.MishOp, e: TirEmitter):
    return [e.binary(BinaryFn.MUL, op.X, e.unary(UnaryFn.TANH, _softplus_of(e, op.X)))]


def _elu_of(e, x, alpha):
    """alpha * (exp(min(x, 0)) - 1) + relu(x)"""
    negative = e.binary(BinaryFn.MIN, x, e.scalar(0.0, x))
    expm1 = e.binary(BinaryFn.SUB, e.unary(UnaryFn.EXP, negative), e.scalar(1.0, x))
    return e.binary(BinaryFn.ADD, e.unary(UnaryFn.RELU, x), e.binary(BinaryFn.MUL, expm1, e.scalar(alpha, x)))


@lowers(onnx.EluOp)
def _elu(op: onnx.EluOp, e: TirEmitter):
    return [_elu_of(e, op.X, op.alpha.value.data)]


@lowers(onnx.CeluOp)
def _celu(op: onnx.CeluOp, e: TirEmitter):
    alpha = op.alpha.value.data
    x = e.binary(BinaryFn.DIV, op.X, e.scalar(alpha, op.X))
    negative = e.binary(BinaryFn.MIN, x, e.scalar(0.0, x))
    expm1 = e.binary(BinaryFn.SUB, e.unary(UnaryFn.EXP, negative), e.scalar(1.0, x))
    return [e.binary(BinaryFn.ADD, e.unary(UnaryFn.RELU, op.X), e.binary(BinaryFn.MUL, expm1, e.scalar(alpha, x)))]


@lowers(onnx.SeluOp)
def _selu(op: onnx.SeluOp, e: TirEmitter):
    elu = _elu_of(e, op.X, op.alpha.value.data)
    return [e.binary(BinaryFn.MUL, elu, e.scalar(op.gamma.value.data, op.X))]


@lowers(onnx.ThresholdedReluOp)
def _thresholded_relu(op: onnx.ThresholdedReluOp, e: TirEmitter):
    x = op.X
    keep = e.binary(BinaryFn.GT, x, e.scalar(op.alpha.value.data, x))
    return [_where_values(e, keep, x, e.scalar(0.0, x))]


@lowers(onnx.PReluOp)
def _prelu(op: onnx.PReluOp, e: TirEmitter):
    x, slope = op.X, op.slope
    negative = e.binary(BinaryFn.MUL, e.binary(BinaryFn.MIN, x, e.scalar(0.0, x)), slope)
    return [e.binary(BinaryFn.ADD, e.unary(UnaryFn.RELU, x), negative)]


@lowers(onnx.SwishOp)
def _swish(op: onnx.SwishOp, e: TirEmitter):
    x = op.X
    scaled = e.binary(BinaryFn.MUL, x, e.scalar(op.alpha.value.data, x))
    return [e.binary(BinaryFn.MUL, x, e.unary(UnaryFn.SIGMOID, scaled))]


@lowers(onnx.TanOp)
def _tan(op: onnx.TanOp, e: TirEmitter):
    return [e.binary(BinaryFn.DIV, e.unary(UnaryFn.SIN, op.input), e.unary(UnaryFn.COS, op.input))]


@lowers(onnx.SinhOp, onnx.CoshOp)
def _hyperbolic(op: onnx.SinhOp | onnx.CoshOp, e: TirEmitter):
    x = op.input
    fn = BinaryFn.SUB if isinstance(op, onnx.SinhOp) else BinaryFn.ADD
    both = e.binary(fn, e.unary(UnaryFn.EXP, x), e.unary(UnaryFn.EXP, e.unary(UnaryFn.NEG, x)))
    return [e.binary(BinaryFn.MUL, both, e.scalar(0.5, x))]


@lowers(onnx.IsNaNOp)
def _isnan(op: onnx.IsNaNOp, e: TirEmitter):
    return [e.binary(BinaryFn.NE, op.X, op.X)]


@lowers(onnx.CastLikeOp)
def _cast_like(op: onnx.CastLikeOp, e: TirEmitter):
    return [e.cast_like(op.input, op.target_type)]


def _where_values(e, condition, x, y):
    for v in (condition, x, y):
        static_shape(v, e)
    return e.where(condition, x, y)


@lowers(onnx.FloorOp)
def _floor(op: onnx.FloorOp, e: TirEmitter):
    return [e.floor(op.X)]


@lowers(onnx.CeilOp)
def _ceil(op: onnx.CeilOp, e: TirEmitter):
    return [e.unary(UnaryFn.NEG, e.floor(e.unary(UnaryFn.NEG, op.X)))]




@lowers(onnx.SignOp)
def _sign(op: onnx.SignOp, e: TirEmitter):
    x = op.input
    positive = e.cast_like(e.binary(BinaryFn.GT, x, e.scalar(0, x)), x)
    negative = e.cast_like(e.binary(BinaryFn.LT, x, e.scalar(0, x)), x)
    return [e.binary(BinaryFn.SUB, positive, negative)]


@lowers(onnx.IsInfOp)
def _isinf(op: onnx.IsInfOp, e: TirEmitter):
    x = op.X
    pos, neg = op.detect_positive.value.data, op.detect_negative.value.data
    if pos and neg:
        return [e.binary(BinaryFn.EQ, e.unary(UnaryFn.ABS, x), e.scalar(np.inf, x))]
    if pos:
        return [e.binary(BinaryFn.EQ, x, e.scalar(np.inf, x))]
    if neg:
        return [e.binary(BinaryFn.EQ, x, e.scalar(-np.inf, x))]
    return [e.binary(BinaryFn.LT, x, e.scalar(-np.inf, x))]  # detects nothing: all false


def _sqrt_of(e, x):
    return e.unary(UnaryFn.SQRT, x)


def _asin_of(e, x):
    """atan(x / sqrt(1 - x^2))"""
    root = _sqrt_of(e, e.binary(BinaryFn.SUB, e.scalar(1.0, x), e.binary(BinaryFn.MUL, x, x)))
    return e.unary(UnaryFn.ATAN, e.binary(BinaryFn.DIV, x, root))


@lowers(onnx.AsinOp)
def _asin(op: onnx.AsinOp, e: TirEmitter):
    return [_asin_of(e, op.input)]


@lowers(onnx.AcosOp)
def _acos(op: onnx.AcosOp, e: TirEmitter):
    return [e.binary(BinaryFn.SUB, e.scalar(np.pi / 2, op.input), _asin_of(e, op.input))]


@lowers(onnx.AcoshOp)
def _acosh(op: onnx.AcoshOp, e: TirEmitter):
    x = op.input
    root = _sqrt_of(e, e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, x, x), e.scalar(-1.0, x)))
    return [e.unary(UnaryFn.LOG, e.binary(BinaryFn.ADD, x, root))]


@lowers(onnx.AsinhOp)
def _asinh(op: onnx.AsinhOp, e: TirEmitter):
    # odd: computed on |x|, as x + sqrt(x^2 + 1) cancels to 0 for large negative x
    x = op.input
    a = e.unary(UnaryFn.ABS, x)
    root = _sqrt_of(e, e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, a, a), e.scalar(1.0, x)))
    y = e.unary(UnaryFn.LOG, e.binary(BinaryFn.ADD, a, root))
    negative = e.binary(BinaryFn.LT, x, e.scalar(0.0, x))
    return [_where_values(e, negative, e.unary(UnaryFn.NEG, y), y)]


@lowers(onnx.AtanhOp)
def _atanh(op: onnx.AtanhOp, e: TirEmitter):
    x = op.input
    one = e.scalar(1.0, x)
    ratio = e.binary(BinaryFn.DIV, e.binary(BinaryFn.ADD, one, x), e.binary(BinaryFn.SUB, one, x))
    return [e.binary(BinaryFn.MUL, e.unary(UnaryFn.LOG, ratio), e.scalar(0.5, x))]


@lowers(onnx.ShrinkOp)
def _shrink(op: onnx.ShrinkOp, e: TirEmitter):
    x = op.input
    lambd, bias = op.lambd.value.data, op.bias.value.data
    below = e.binary(BinaryFn.LT, x, e.scalar(-lambd, x))
    above = e.binary(BinaryFn.GT, x, e.scalar(lambd, x))
    zero = e.scalar(0, x)
    upper = _where_values(e, above, e.binary(BinaryFn.SUB, x, e.scalar(bias, x)), zero)
    return [_where_values(e, below, e.binary(BinaryFn.ADD, x, e.scalar(bias, x)), upper)]
