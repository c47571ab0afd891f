"""Lowerings of ONNX's constants and element-wise ops to `tir`."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, IntegerType, TensorType, f32
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.onnx import INITIALIZER_ATTR
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import Emitter, LoweringTable, static_shape

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def scalar(e: Emitter, value: float, like: SSAValue) -> SSAValue:
    """A 0-d constant of `like`'s element type."""
    dtype = dtypes.numpy_dtype(like.type.element_type)
    return e.value(tir.ConstantOp(array_to_attr(np.asarray(value, dtype=dtype))))


def constant(e: Emitter, array: np.ndarray) -> SSAValue:
    return e.value(tir.ConstantOp(array_to_attr(array)))


@lowers("Constant")
def _constant(op, e):
    p = op.properties
    name = op.attributes.get(INITIALIZER_ATTR)
    if p.get("value") is not None:
        return [e.value(tir.ConstantOp(p["value"], name.data if name else None))]
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if p.get(key) is not None:
            return [constant(e, np.asarray(p[key].value.data, dtype))]
    for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if p.get(key) is not None:
            return [constant(e, np.asarray(list(p[key].get_values()), dtype))]
    raise e.error("only tensor, float and int constants can be lowered")


@lowers("ConstantOfShape")
def _constant_of_shape(op, e):
    shape = constant_array(op.input)
    if shape is None:
        raise e.error("the shape input must be a compile-time constant")
    value = op.properties.get("value")
    if value is None:
        fill, elem = FloatAttr(0.0, f32), f32
    else:
        v = attr_to_array(value).reshape(-1)[0]
        elem = value.get_element_type()
        fill = FloatAttr(float(v), elem) if np.issubdtype(v.dtype, np.floating) else IntegerAttr(int(v), elem)
    return [e.value(tir.FullOp(fill, TensorType(elem, [int(d) for d in shape.reshape(-1)])))]


@lowers("Identity")
def _identity(op, e):
    return [op.input]


@lowers("Dropout")
def _dropout(op, e):
    # Inference: the identity; the mask is all true.
    if op.training_mode is not None and constant_array(op.training_mode) is not None:
        if bool(constant_array(op.training_mode).reshape(-1)[0]):
            raise e.error("training_mode=true is not supported for inference")
    results = [op.data]
    if op.mask is not None:
        shape = static_shape(op.data, e)
        results.append(constant(e, np.ones(shape, dtype=bool)))
    return results


_UNARY = {
    "Abs": "abs", "Atan": "atan", "Cos": "cos", "Erf": "erf", "Exp": "exp",
    "Log": "log", "Neg": "neg", "Not": "not", "Reciprocal": "reciprocal", "Relu": "relu",
    "Sigmoid": "sigmoid", "Sin": "sin", "Sqrt": "sqrt", "Tanh": "tanh",
}


def _unary(op, e):
    return [unary(e, _UNARY[op.ONNX_OP_TYPE], op.operands[0])]


for _t in _UNARY:
    LOWERINGS[_t] = _unary


@lowers("Gelu")
def _gelu(op, e):
    fn = "gelu_tanh" if op.approximate.data == "tanh" else "gelu"
    return [e.value(tir.UnaryOp(fn, op.X))]


_BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "eq",
    "And": "and", "Or": "or", "Xor": "ne",
    "Greater": "gt", "GreaterOrEqual": "ge", "Less": "lt", "LessOrEqual": "le",
}
_COMPARISONS = {"eq", "ne", "gt", "ge", "lt", "le"}


def binary(e: Emitter, fn: str, a: SSAValue, b: SSAValue) -> SSAValue:
    sa, sb = static_shape(a, e), static_shape(b, e)
    try:
        tir.broadcast_shapes(sa, sb)
    except ValueError as err:
        raise e.error(str(err)) from None
    elem = IntegerType(1) if fn in _COMPARISONS else None
    return e.value(tir.BinaryOp(fn, a, b, elem))


def unary(e: Emitter, fn: str, x: SSAValue) -> SSAValue:
    static_shape(x, e)
    return e.value(tir.UnaryOp(fn, x))


def _binary(op, e):
    a, b = op.operands
    return [binary(e, _BINARY[op.ONNX_OP_TYPE], a, b)]


for _t in _BINARY:
    LOWERINGS[_t] = _binary


@lowers("Max", "Min", "Sum")
def _variadic(op, e):
    fn = {"Max": "max", "Min": "min", "Sum": "add"}[op.ONNX_OP_TYPE]
    value = op.operands[0]
    for other in op.operands[1:]:
        value = binary(e, fn, value, other)
    return [value]


@lowers("Mean")
def _mean(op, e):
    value = op.operands[0]
    for other in op.operands[1:]:
        value = binary(e, "add", value, other)
    return [binary(e, "div", value, scalar(e, len(op.operands), value))]


@lowers("Mod")
def _mod(op, e):
    if op.fmod.value.data:
        # C's fmod takes the dividend's sign: mod(|a|, |b|) with a's sign.
        magnitude = binary(e, "mod", unary(e, "abs", op.A), unary(e, "abs", op.B))
        negative = binary(e, "lt", op.A, scalar(e, 0, op.A))
        return [_where_values(e, negative, unary(e, "neg", magnitude), magnitude)]
    return [binary(e, "mod", op.A, op.B)]


@lowers("LeakyRelu")
def _leaky_relu(op, e):
    alpha = op.alpha.value.data
    if not 0 <= alpha <= 1:
        raise e.error(f"alpha {alpha} outside [0, 1] is not supported")
    return [binary(e, "max", op.X, binary(e, "mul", op.X, scalar(e, alpha, op.X)))]


@lowers("Where")
def _where(op, e):
    return [_where_values(e, op.condition, op.X, op.Y)]


@lowers("Cast")
def _cast(op, e):
    to = dtypes.mlir_type(op.to.value.data)
    if to is None:
        raise e.error(f"cast to {dtypes.onnx_name(op.to.value.data)} is not supported")
    shape = static_shape(op.input, e)
    return [e.value(tir.CastOp.build(operands=[op.input], result_types=[TensorType(to, shape)]))]


@lowers("Clip")
def _clip(op, e):
    info = np.finfo(np.float32)
    bounds = []
    for value, default in ((op.min, float(info.min)), (op.max, float(info.max))):
        if value is None:
            bounds.append(default)
            continue
        array = constant_array(value)
        if array is None:
            raise e.error("min and max must be compile-time constants")
        bounds.append(float(array.reshape(-1)[0]))
    return [
        e.value(
            tir.ClipOp.build(
                operands=[op.input],
                result_types=[op.input.type],
                properties={"min": FloatAttr(bounds[0], f32), "max": FloatAttr(bounds[1], f32)},
            )
        )
    ]


# -- activations that are compositions of element-wise ops ---------------------


def _f(op, name: str) -> float:
    return op.properties[name].value.data


@lowers("HardSigmoid")
def _hard_sigmoid(op, e):
    x = op.X
    y = binary(e, "add", binary(e, "mul", x, scalar(e, _f(op, "alpha"), x)), scalar(e, _f(op, "beta"), x))
    return [binary(e, "min", binary(e, "max", y, scalar(e, 0.0, x)), scalar(e, 1.0, x))]


@lowers("HardSwish")
def _hard_swish(op, e):
    x = op.X
    y = binary(e, "add", binary(e, "mul", x, scalar(e, 1 / 6, x)), scalar(e, 0.5, x))
    gate = binary(e, "min", binary(e, "max", y, scalar(e, 0.0, x)), scalar(e, 1.0, x))
    return [binary(e, "mul", x, gate)]


def _softplus_of(e, x):
    """log(1 + exp(x)), written stably: max(x, 0) + log(1 + exp(-|x|))."""
    neg_abs = unary(e, "neg", unary(e, "abs", x))
    tail = unary(e, "log", binary(e, "add", unary(e, "exp", neg_abs), scalar(e, 1.0, x)))
    return binary(e, "add", unary(e, "relu", x), tail)


@lowers("Softplus")
def _softplus(op, e):
    return [_softplus_of(e, op.X)]


@lowers("Softsign")
def _softsign(op, e):
    x = op.input
    return [binary(e, "div", x, binary(e, "add", unary(e, "abs", x), scalar(e, 1.0, x)))]


@lowers("Mish")
def _mish(op, e):
    return [binary(e, "mul", op.X, unary(e, "tanh", _softplus_of(e, op.X)))]


def _elu_of(e, x, alpha):
    """alpha * (exp(min(x, 0)) - 1) + relu(x)"""
    negative = binary(e, "min", x, scalar(e, 0.0, x))
    expm1 = binary(e, "sub", unary(e, "exp", negative), scalar(e, 1.0, x))
    return binary(e, "add", unary(e, "relu", x), binary(e, "mul", expm1, scalar(e, alpha, x)))


@lowers("Elu")
def _elu(op, e):
    return [_elu_of(e, op.X, _f(op, "alpha"))]


@lowers("Celu")
def _celu(op, e):
    alpha = _f(op, "alpha")
    x = binary(e, "div", op.X, scalar(e, alpha, op.X))
    negative = binary(e, "min", x, scalar(e, 0.0, x))
    expm1 = binary(e, "sub", unary(e, "exp", negative), scalar(e, 1.0, x))
    return [binary(e, "add", unary(e, "relu", op.X), binary(e, "mul", expm1, scalar(e, alpha, x)))]


@lowers("Selu")
def _selu(op, e):
    elu = _elu_of(e, op.X, _f(op, "alpha"))
    return [binary(e, "mul", elu, scalar(e, _f(op, "gamma"), op.X))]


@lowers("ThresholdedRelu")
def _thresholded_relu(op, e):
    x = op.X
    keep = binary(e, "gt", x, scalar(e, _f(op, "alpha"), x))
    return [_where_values(e, keep, x, scalar(e, 0.0, x))]


@lowers("PRelu")
def _prelu(op, e):
    x, slope = op.X, op.slope
    negative = binary(e, "mul", binary(e, "min", x, scalar(e, 0.0, x)), slope)
    return [binary(e, "add", unary(e, "relu", x), negative)]


@lowers("Swish")
def _swish(op, e):
    x = op.X
    scaled = binary(e, "mul", x, scalar(e, _f(op, "alpha"), x))
    return [binary(e, "mul", x, unary(e, "sigmoid", scaled))]


@lowers("Tan")
def _tan(op, e):
    return [binary(e, "div", unary(e, "sin", op.input), unary(e, "cos", op.input))]


@lowers("Sinh", "Cosh")
def _hyperbolic(op, e):
    x = op.input
    fn = "sub" if op.ONNX_OP_TYPE == "Sinh" else "add"
    both = binary(e, fn, unary(e, "exp", x), unary(e, "exp", unary(e, "neg", x)))
    return [binary(e, "mul", both, scalar(e, 0.5, x))]


@lowers("IsNaN")
def _isnan(op, e):
    return [binary(e, "ne", op.X, op.X)]


@lowers("CastLike")
def _cast_like(op, e):
    to = op.target_type.type.element_type
    shape = static_shape(op.input, e)
    return [e.value(tir.CastOp.build(operands=[op.input], result_types=[TensorType(to, shape)]))]


def _where_values(e, condition, x, y):
    shape = tir.broadcast_shapes(
        tir.broadcast_shapes(static_shape(condition, e), static_shape(x, e)), static_shape(y, e)
    )
    return e.value(
        tir.WhereOp.build(operands=[condition, x, y], result_types=[TensorType(x.type.element_type, shape)])
    )


def _floor_of(e, x):
    """x - mod(x, 1): numpy's and PyTorch's remainder takes the divisor's sign."""
    return binary(e, "sub", x, binary(e, "mod", x, scalar(e, 1.0, x)))


@lowers("Floor")
def _floor(op, e):
    return [_floor_of(e, op.X)]


@lowers("Ceil")
def _ceil(op, e):
    return [unary(e, "neg", _floor_of(e, unary(e, "neg", op.X)))]


def _as(e, x, like):
    shape = static_shape(x, e)
    return e.value(tir.CastOp.build(operands=[x], result_types=[TensorType(like.type.element_type, shape)]))


@lowers("Sign")
def _sign(op, e):
    x = op.input
    positive = _as(e, binary(e, "gt", x, scalar(e, 0, x)), x)
    negative = _as(e, binary(e, "lt", x, scalar(e, 0, x)), x)
    return [binary(e, "sub", positive, negative)]


@lowers("IsInf")
def _isinf(op, e):
    x = op.X
    pos, neg = op.detect_positive.value.data, op.detect_negative.value.data
    if pos and neg:
        return [binary(e, "eq", unary(e, "abs", x), scalar(e, np.inf, x))]
    if pos:
        return [binary(e, "eq", x, scalar(e, np.inf, x))]
    if neg:
        return [binary(e, "eq", x, scalar(e, -np.inf, x))]
    return [binary(e, "lt", x, scalar(e, -np.inf, x))]  # detects nothing: all false


def _sqrt_of(e, x):
    return unary(e, "sqrt", x)


def _asin_of(e, x):
    """atan(x / sqrt(1 - x^2))"""
    root = _sqrt_of(e, binary(e, "sub", scalar(e, 1.0, x), binary(e, "mul", x, x)))
    return unary(e, "atan", binary(e, "div", x, root))


@lowers("Asin")
def _asin(op, e):
    return [_asin_of(e, op.input)]


@lowers("Acos")
def _acos(op, e):
    return [binary(e, "sub", scalar(e, np.pi / 2, op.input), _asin_of(e, op.input))]


@lowers("Acosh")
def _acosh(op, e):
    x = op.input
    root = _sqrt_of(e, binary(e, "add", binary(e, "mul", x, x), scalar(e, -1.0, x)))
    return [unary(e, "log", binary(e, "add", x, root))]


@lowers("Asinh")
def _asinh(op, e):
    # odd: computed on |x|, as x + sqrt(x^2 + 1) cancels to 0 for large negative x
    x = op.input
    a = unary(e, "abs", x)
    root = _sqrt_of(e, binary(e, "add", binary(e, "mul", a, a), scalar(e, 1.0, x)))
    y = unary(e, "log", binary(e, "add", a, root))
    negative = binary(e, "lt", x, scalar(e, 0.0, x))
    return [_where_values(e, negative, unary(e, "neg", y), y)]


@lowers("Atanh")
def _atanh(op, e):
    x = op.input
    ratio = binary(e, "div", binary(e, "add", scalar(e, 1.0, x), x), binary(e, "sub", scalar(e, 1.0, x), x))
    return [binary(e, "mul", unary(e, "log", ratio), scalar(e, 0.5, x))]


@lowers("Shrink")
def _shrink(op, e):
    x = op.input
    lambd, bias = _f(op, "lambd"), _f(op, "bias")
    below = binary(e, "lt", x, scalar(e, -lambd, x))
    above = binary(e, "gt", x, scalar(e, lambd, x))
    zero = scalar(e, 0, x)
    upper = _where_values(e, above, binary(e, "sub", x, scalar(e, bias, x)), zero)
    return [_where_values(e, below, binary(e, "add", x, scalar(e, bias, x)), upper)]
