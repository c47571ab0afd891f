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
from forge_opt.transforms.lowering import Emitter, static_shape

LOWERINGS: dict = {}


def lowers(*op_types: str):
    def register(fn):
        for t in op_types:
            LOWERINGS[t] = fn
        return fn

    return register


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
    "Abs": "abs", "Ceil": "ceil", "Cos": "cos", "Erf": "erf", "Exp": "exp", "Floor": "floor",
    "Log": "log", "Neg": "neg", "Not": "not", "Reciprocal": "reciprocal", "Relu": "relu",
    "Sigmoid": "sigmoid", "Sign": "sign", "Sin": "sin", "Sqrt": "sqrt", "Tanh": "tanh",
}


def _unary(op, e):
    return [e.value(tir.UnaryOp(_UNARY[op.ONNX_OP_TYPE], op.operands[0]))]


for _t in _UNARY:
    LOWERINGS[_t] = _unary


@lowers("Gelu")
def _gelu(op, e):
    fn = "gelu_tanh" if op.approximate.data == "tanh" else "gelu"
    return [e.value(tir.UnaryOp(fn, op.X))]


_BINARY = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Equal": "eq",
    "Greater": "gt", "GreaterOrEqual": "ge", "Less": "lt", "LessOrEqual": "le",
}
_COMPARISONS = {"eq", "gt", "ge", "lt", "le"}


def binary(e: Emitter, fn: str, a: SSAValue, b: SSAValue) -> SSAValue:
    elem = IntegerType(1) if fn in _COMPARISONS else None
    return e.value(tir.BinaryOp(fn, a, b, elem))


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
        raise e.error("fmod=1 is not supported")
    return [binary(e, "mod", op.A, op.B)]


@lowers("LeakyRelu")
def _leaky_relu(op, e):
    alpha = op.alpha.value.data
    if not 0 <= alpha <= 1:
        raise e.error(f"alpha {alpha} outside [0, 1] is not supported")
    return [binary(e, "max", op.X, binary(e, "mul", op.X, scalar(e, alpha, op.X)))]


@lowers("Where")
def _where(op, e):
    shape = tir.broadcast_shapes(
        tir.broadcast_shapes(static_shape(op.condition, e), static_shape(op.X, e)), static_shape(op.Y, e)
    )
    return [
        e.value(
            tir.WhereOp.build(
                operands=[op.condition, op.X, op.Y],
                result_types=[TensorType(op.X.type.element_type, shape)],
            )
        )
    ]


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
