"""StableHLO forms of Forge's element-wise, matmul, normalisation,
embedding and reduction functions: each computes what the record's golden
computes (`eltwise.py`, `nn.py`, `reduce.py`), in the same element type."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType, i1, i64
from xdsl.ir import Block, Region, SSAValue

from forge_opt import dtypes
from forge_opt.dialects import stablehlo as hlo
from forge_opt.dialects.forge_functions.record import Call
from forge_opt.dialects.forge_functions.stablehlo_form import registry
from forge_opt.dialects.stablehlo_build import Hlo, element, shape, tensor

FORMS, form = registry()

_BINARY = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply", "Divide": "divide", "Max": "maximum",
           "Min": "minimum", "Power": "power"}
_COMPARE = {"Equal": "EQ", "NotEqual": "NE", "Greater": "GT", "GreaterEqual": "GE", "Less": "LT",
            "LessEqual": "LE"}
_UNARY = {"Exp": "exponential", "Sqrt": "sqrt", "Sigmoid": "logistic", "Tanh": "tanh", "Abs": "abs",
          "Sine": "sine", "Cosine": "cosine", "Erf": "chlo.erf"}


@form(*_BINARY)
def _binary(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    a, b = (h.convert(x, out.element_type) for x in args)  # torch's promotion (an integer Divide is float32)
    return h.binary(_BINARY[call.function], a, b)


@form("Remainder")
def _remainder(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """torch.remainder takes the divisor's sign; StableHLO's the dividend's."""
    a, b = (h.broadcast_to(h.convert(x, out.element_type), out.get_shape()) for x in args)
    r = h.binary("remainder", a, b)
    zero = h.like(0, r)
    wrong_sign = h.binary("and", h.compare("NE", r, zero),
                          h.compare("NE", h.compare("LT", r, zero), h.compare("LT", b, zero)))
    return h.select(wrong_sign, h.binary("add", r, b), r)


@form(*_COMPARE)
def _compare(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """torch::eq(a, b).to(a.dtype()), compared in the promoted type."""
    a, b = args
    wide = dtypes.mlir_type_of_numpy(np.promote_types(dtypes.numpy_dtype(element(a)), dtypes.numpy_dtype(element(b))))
    return h.convert(h.compare(_COMPARE[call.function], h.convert(a, wide), h.convert(b, wide)), out.element_type)


@form(*_UNARY)
def _unary(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.unary(_UNARY[call.function], args[0])


@form("Log", "Reciprocal")
def _with_epsilon(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """Forge's golden adds 1e-10 first (op_log.cpp, op_reciprocal.cpp)."""
    x = h.binary("add", args[0], h.full(1e-10, element(args[0])))
    return h.unary("log", x) if call.function == "Log" else h.binary("divide", h.like(1, x), x)


@form("Relu")
def _relu(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.binary("maximum", args[0], h.full(0, element(args[0])))


@form("Atan")
def _atan(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.binary("atan2", args[0], h.like(1, args[0]))


@form("LogicalNot")
def _logical_not(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.convert(h.compare("EQ", args[0], h.full(0, element(args[0]))), out.element_type)


@form("Gelu")
def _gelu(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    if call.keywords["approximate"] == "tanh":
        cube = h.binary("multiply", h.binary("multiply", x, x), x)
        inner = h.binary("add", x, h.binary("multiply", h.full(0.044715, element(x)), cube))
        curve = h.unary("tanh", h.binary("multiply", h.full(math.sqrt(2 / math.pi), element(x)), inner))
    else:
        curve = h.unary("chlo.erf", h.binary("divide", x, h.full(math.sqrt(2), element(x))))
    half = h.binary("multiply", h.full(0.5, element(x)), x)
    return h.binary("multiply", half, h.binary("add", h.full(1, element(x)), curve))


@form("LeakyRelu")
def _leaky_relu(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    scaled = h.binary("multiply", x, h.full(call.keywords["alpha"], element(x)))
    return h.select(h.compare("GE", x, h.full(0, element(x))), x, scaled)


@form("Clip")
def _clip(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    low, high = call.keywords["min"], call.keywords["max"]
    dtype = dtypes.numpy_dtype(element(x))
    if dtypes.is_float(dtype):
        return h.add(hlo.ClampOp([h.full(low, element(x)), x, h.full(high, element(x))], x.type))
    # an integer x: numpy clips to the float bounds and truncates (np.clip(x, min, max).astype(x.dtype))
    info = np.iinfo(dtype)

    def bound(v: float, rounding) -> SSAValue:
        """v rounded, within the type's range, as a splat like x."""
        whole = rounding(v) if math.isfinite(v) else v
        return h.like(int(min(max(whole, info.min), info.max)), x)
    if low > high:  # numpy gives the upper bound everywhere
        return bound(high, math.trunc)
    below = h.compare("LT", x, bound(low, math.ceil))
    above = h.compare("GT", x, bound(high, math.floor))
    return h.select(above, bound(high, math.trunc), h.select(below, bound(low, math.trunc), x))


@form("Cast")
def _cast(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.convert(args[0], out.element_type)


@form("Identity")
def _identity(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return args[0]


@form("Where")
def _where(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    condition, x, y = args
    if element(condition) != i1:
        condition = h.compare("NE", condition, h.full(0, element(condition)))
    return h.select(condition, h.convert(x, out.element_type), h.convert(y, out.element_type))


# -- matmul, softmax, normalisation, embedding ------------------------------------------


@form("Matmul")
def _matmul(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """torch.matmul: 1-D operands as a row and a column, batch dims broadcast."""
    a, b, bias = args
    a, b = h.convert(a, out.element_type), h.convert(b, out.element_type)
    if len(shape(a)) == 1:
        a = h.reshape(a, (1, *shape(a)))
    if len(shape(b)) == 1:
        b = h.reshape(b, (*shape(b), 1))
    batch = np.broadcast_shapes(shape(a)[:-2], shape(b)[:-2])
    a = h.broadcast_to(a, (*batch, *shape(a)[-2:]))
    b = h.broadcast_to(b, (*batch, *shape(b)[-2:]))
    n = len(batch)
    product = h.dot(a, b, (range(n), range(n)), ([n + 1], [n]))
    product = h.reshape(product, out.get_shape())
    return product if bias is None else h.binary("add", product, bias)


def _reduce_keep(h: Hlo, x: SSAValue, axis: int, kind: str, init: float) -> SSAValue:
    reduced = h.reduce(x, [axis], kind, init)
    kept = list(shape(x))
    kept[axis] = 1
    return h.reshape(reduced, kept)


def _shifted(h: Hlo, x: SSAValue, axis: int) -> SSAValue:
    return h.binary("subtract", x, _reduce_keep(h, x, axis, "maximum", -math.inf))


@form("Softmax", "LogSoftmax")
def _softmax(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    axis = call.keywords["dim"] % len(shape(x))
    shifted = _shifted(h, x, axis)
    total = _reduce_keep(h, h.unary("exponential", shifted), axis, "add", 0)
    if call.function == "Softmax":
        return h.binary("divide", h.unary("exponential", shifted), total)
    return h.binary("subtract", shifted, h.unary("log", total))


def _mean(h: Hlo, x: SSAValue, axis: int) -> SSAValue:
    return h.binary("divide", _reduce_keep(h, x, axis, "add", 0), h.full(shape(x)[axis], element(x)))


@form("Layernorm")
def _layernorm(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x, weights, bias = args
    axis = len(shape(x)) - 1
    centred = h.binary("subtract", x, _mean(h, x, axis))
    variance = _mean(h, h.binary("multiply", centred, centred), axis)
    scale = h.unary("sqrt", h.binary("add", variance, h.full(call.keywords["epsilon"], element(x))))
    return h.binary("add", h.binary("multiply", h.binary("divide", centred, scale), weights), bias)


@form("Batchnorm")
def _batchnorm(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x, weights, bias, mean, var = args
    per_channel = (1, -1) + (1,) * (len(shape(x)) - 2)

    def channel(v: SSAValue) -> SSAValue:
        return h.reshape(v, [shape(x)[1] if d == -1 else d for d in per_channel])
    scale = h.binary("divide", channel(weights),
                     h.unary("sqrt", h.binary("add", channel(var), h.full(call.keywords["epsilon"], element(x)))))
    return h.binary("add", h.binary("multiply", h.binary("subtract", x, channel(mean)), scale), channel(bias))


@form("Embedding")
def _embedding(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    indices, table = args
    return h.take(table, indices, 0)


# -- reductions -------------------------------------------------------------------------


@form("ReduceSum", "ReduceAvg", "ReduceMax")
def _reduce(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    axis = call.keywords["dim"] % len(shape(x))
    if call.function == "ReduceMax":
        reduced = h.reduce(x, [axis], "maximum", _lowest(x))
    else:
        reduced = h.reduce(x, [axis], "add", 0)
        if call.function == "ReduceAvg":
            reduced = h.binary("divide", reduced, h.full(shape(x)[axis], element(x)))
    return h.reshape(reduced, out.get_shape())


def _lowest(x: SSAValue) -> float | int:
    """The start of a maximum over x's element type: -inf, the least integer, or False."""
    dtype = dtypes.numpy_dtype(element(x))
    if dtypes.is_float(dtype):
        return -math.inf
    return 0 if dtype == np.bool_ else int(np.iinfo(dtype).min)


def _argmax_region(value_type, index_type) -> Region:
    """Keep the larger value, a NaN first, the lower index on a tie (numpy's
    argmax), in the comparator jax writes, the form tt-mlir recognises."""
    scalars = [tensor(value_type, []), tensor(index_type, [])]
    block = Block(arg_types=[scalars[0], scalars[1], scalars[0], scalars[1]])
    inner = Hlo(block)
    va, ia, vb, ib = block.args
    take_value = inner.binary("or", inner.compare("GT", va, vb), inner.compare("NE", va, va))
    tie = inner.binary("and", inner.compare("EQ", va, vb), inner.compare("LT", ia, ib))
    take_index = inner.binary("or", take_value, tie)
    block.add_op(hlo.ReturnOp(operands=[[inner.select(take_value, va, vb), inner.select(take_index, ia, ib)]]))
    return Region(block)


@form("Argmax")
def _argmax(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    if call.keywords["dim"] is None:  # over every element
        x = h.reshape(x, [math.prod(shape(x))])
    axis = (call.keywords["dim"] or 0) % len(shape(x))
    indices = h.iota(i64, shape(x), axis)
    dims = [d for i, d in enumerate(shape(x)) if i != axis]
    low = h.full(_lowest(x), element(x))
    op = hlo.ReduceOp(operands=[[x, indices, low, h.full(0, i64)]],
                      result_types=[[tensor(element(x), dims), tensor(i64, dims)]],
                      properties={"dimensions": hlo.i64_array([axis])},
                      regions=[_argmax_region(element(x), i64)])
    h.block.add_op(op)
    return h.reshape(h.convert(op.results[1], out.element_type), out.get_shape())


@form("CumSum")
def _cumsum(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    axis = call.keywords["dim"] % len(shape(x))
    n = shape(x)[axis]
    window = [n if i == axis else 1 for i in range(len(shape(x)))]
    padding = [(n - 1, 0) if i == axis else (0, 0) for i in range(len(shape(x)))]
    return h.reduce_window(x, "add", 0, window, [1] * len(shape(x)), padding)
