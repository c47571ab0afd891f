"""Forge's element-wise functions (forge/forge/op/eltwise_binary.py,
eltwise_unary.py; forge/csrc/ops/op_<name>.cpp): their records, checks,
shapes, element types and goldens."""

from __future__ import annotations

import math

import numpy as np

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_functions.element_types import data_format, format_dtype, promote
from forge_opt.dialects.forge_functions.record import (
    AB,
    REQUIRED,
    Call,
    ForgeFunction,
    Shape,
    broadcast_error,
    dtype_of,
    promoted,
    rule,
    same_shape,
)
from forge_opt.dtypes import is_float


@rule("eltwise-broadcast", "operand shapes broadcast numpy-style (aligned from the right; a differing dim must be 1)",
      "forge/csrc/ops/op_common.cpp compute_elementwise_binary_shape")
def _broadcasts(call: Call) -> str | None:
    return broadcast_error([s for s in call.shapes if s is not None])


def _broadcast(call: Call) -> Shape:
    return tuple(shapes.broadcast(*(s for s in call.shapes if s is not None)))


def _true_division(call: Call) -> np.dtype:
    """torch::div: true division, an integer quotient is float32."""
    d = promoted(call)
    return d if is_float(d) else np.dtype(np.float32)


def _binary(name: str, kernel, dtype=promoted) -> ForgeFunction:
    return ForgeFunction(name, AB, _broadcast, kernel, dtype, rules=(_broadcasts,))


def divide(a, b):
    """torch::div: true division, for integers too (op_divide.cpp)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


def _remainder(a, b):
    """torch::remainder: the sign of the divisor; NaN for a float over 0, as torch gives (no warning)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, b)


BINARY = (
    _binary("Add", np.add),
    _binary("Subtract", np.subtract),
    _binary("Multiply", np.multiply),
    _binary("Divide", divide, _true_division),
    _binary("Max", np.maximum),
    _binary("Min", np.minimum),
    _binary("Power", np.power),
    _binary("Remainder", _remainder),
    # torch::eq(a, b).to(a.dtype()): a comparison keeps its first operand's type (op_equal.cpp and siblings)
    *(_binary(name, kernel, dtype_of(0)) for name, kernel in (
        ("Equal", np.equal), ("NotEqual", np.not_equal), ("Greater", np.greater),
        ("GreaterEqual", np.greater_equal), ("Less", np.less), ("LessEqual", np.less_equal),
    )),
)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    return _erf(x).astype(x.dtype) if x.size else x.copy()


def _epsilon(fn):
    """Forge's golden adds 1e-10 first, so log(0) and 1/0 are finite
    (op_log.cpp, op_reciprocal.cpp)."""
    def kernel_fn(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x + np.asarray(1e-10, x.dtype))
    return kernel_fn


def sigmoid(x):
    return (1 / (1 + np.exp(-x))).astype(x.dtype)


def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


def gelu(x, approximate="none"):
    if approximate == "tanh":
        return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype)


def _leaky_relu(x, alpha):
    return np.where(x >= 0, x, alpha * x).astype(x.dtype)


def clip(x, min, max):
    return np.clip(x, min, max).astype(x.dtype)


def _cast(x, dtype):
    """`.to()` the dtype of dtype's DataFormat: bool and int64 are Int32,
    so a cast to bool truncates (op_cast.cpp)."""
    with np.errstate(invalid="ignore"):
        return x.astype(format_dtype(dtype))


@rule("cast-dtype", "a dtype Forge has a DataFormat for; bool, int64, int8 and uint8 become Int32 "
      "(truncation, not a comparison with 0)", "forge/forge/op/eltwise_unary.py Cast; forge/csrc/ops/op_cast.cpp")
def _cast_dtype(call: Call) -> str | None:
    if data_format(call.keywords["dtype"]) is None:
        return f"dtype {np.dtype(call.keywords['dtype']).name} has no Forge DataFormat"
    return None


def where(condition, x, y):
    return np.where(condition.astype(bool), x, y)


def _unary(name: str, kernel, **details) -> ForgeFunction:
    return ForgeFunction(name, (("operandA", "single"),), same_shape, kernel, **details)


UNARY = (
    *(_unary(name, kernel) for name, kernel in (
        ("Exp", np.exp), ("Log", _epsilon(np.log)), ("Sqrt", np.sqrt), ("Reciprocal", _epsilon(np.reciprocal)),
        ("Relu", relu), ("Sigmoid", sigmoid), ("Tanh", np.tanh), ("Abs", np.abs), ("Sine", np.sin),
        ("Cosine", np.cos), ("Atan", np.arctan), ("Erf", erf),
    )),
    _unary("LogicalNot", np.logical_not, dtype=lambda call: np.dtype(bool)),
    _unary("Gelu", gelu, keywords=(("approximate", "none"),)),
    _unary("LeakyRelu", _leaky_relu, keywords=(("alpha", REQUIRED),), float_keywords=("alpha",)),
    _unary("Clip", clip, keywords=(("min", REQUIRED), ("max", REQUIRED)), float_keywords=("min", "max")),
    # tensors[0].to(data_format_to_scalar_type(df)), op_cast.cpp
    _unary("Cast", _cast, dtype=lambda call: format_dtype(call.keywords["dtype"]), keywords=(("dtype", REQUIRED),),
           rules=(_cast_dtype,)),
    _unary("Identity", lambda x, unsqueeze=None, unsqueeze_dim=None: x,
           keywords=(("unsqueeze", None), ("unsqueeze_dim", None))),
)

WHERE = ForgeFunction(
    "Where", (("condition", "single"), ("x", "single"), ("y", "single")), _broadcast, where,
    lambda call: promote(dtype_of(1)(call), dtype_of(2)(call)), rules=(_broadcasts,),
)

FUNCTIONS = (*BINARY, *UNARY, WHERE)
