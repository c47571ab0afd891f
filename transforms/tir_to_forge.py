"""`tir-to-forge`: rewrite `tir` ops into `forge` ops, one per Forge call,
respecting what Forge's functions accept (one axis per Transpose, Reduce,
Index and Broadcast; explicit Conv2d padding; pooling padding as
[left, right, top, bottom]; negative dims).

After the rewrite only `forge`, `func` and `builtin` ops may remain: any
other op is an error naming it, its ONNX node and what would lower it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe, node_name
from forge_opt.dialects import forge
from forge_opt.dialects.elements import array_to_attr
from forge_opt.transforms.lowering import Emitter, LoweringTable, erase_dead_ops, rewrite_in_order, table_rewrite

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def call(e: Emitter, function: str, operands, result_type, **keywords):
    return e.value(forge.build(function, operands, result_type, **keywords))


def _shape(value) -> list[int]:
    return list(value.type.get_shape())


def _ints(attr) -> list[int]:
    return list(attr.get_values())


def _t(value, shape) -> TensorType:
    return TensorType(value.type.element_type, shape)


def reshape(e: Emitter, x, shape: list[int]):
    if _shape(x) == list(shape):
        return x
    return call(e, "Reshape", [x], _t(x, shape), shape=list(shape))


@lowers("tir.constant")
def _constant(op, e):
    if op.weight_name is not None:
        new = forge.ParameterOp.build(
            result_types=[op.output.type],
            properties={"parameter_name": op.weight_name, "value": op.value},
        )
    else:
        new = forge.ConstantOp.build(
            result_types=[op.output.type],
            properties={"constant_name": StringAttr(_constant_name(op)), "value": op.value},
        )
    return [e.value(new)]


def _constant_name(op) -> str:
    """A readable name: the ONNX node's (the emitter makes names unique)."""
    name = node_name(op) or "const"
    return name


@lowers("tir.full")
def _full(op, e):
    new = forge.ConstantOp.build(
        result_types=[op.output.type],
        properties={"constant_name": StringAttr(_constant_name(op)), "fill": op.fill},
    )
    return [e.value(new)]


_UNARY = {
    "abs": "Abs", "atan": "Atan", "cos": "Cosine", "erf": "Erf", "exp": "Exp", "log": "Log", "not": "LogicalNot",
    "reciprocal": "Reciprocal", "relu": "Relu", "sigmoid": "Sigmoid", "sin": "Sine",
    "sqrt": "Sqrt", "tanh": "Tanh",
}


@lowers("tir.unary")
def _unary(op, e):
    fn = op.fn.data
    x = op.input
    if fn == "identity":
        return [x]
    if fn in _UNARY:
        return [call(e, _UNARY[fn], [x], op.output.type)]
    if fn in ("gelu", "gelu_tanh"):
        return [call(e, "Gelu", [x], op.output.type, approximate="tanh" if fn == "gelu_tanh" else "none")]
    if fn == "neg":
        return [call(e, "Multiply", [x, scalar_constant(e, -1, x)], op.output.type)]
    raise e.error(f"Forge has no op for the element-wise function '{fn}'")


def scalar_constant(e: Emitter, value, like):
    import numpy as np

    dtype = dtypes.numpy_dtype(like.type.element_type)
    attr = array_to_attr(np.asarray(value, dtype=dtype))
    new = forge.ConstantOp.build(
        result_types=[attr.type],
        properties={"constant_name": StringAttr(_constant_name(e.op)), "value": attr},
    )
    return e.value(new)


_BINARY = {
    "add": "Add", "sub": "Subtract", "mul": "Multiply", "div": "Divide", "max": "Max", "min": "Min",
    "pow": "Power", "eq": "Equal", "ne": "NotEqual", "gt": "Greater", "ge": "GreaterEqual",
    "lt": "Less", "le": "LessEqual", "mod": "Remainder",
    # on booleans (Forge holds them as Int32): and is a product, or a maximum
    "and": "Multiply", "or": "Max",
}


@lowers("tir.binary")
def _binary(op, e):
    fn = op.fn.data
    if fn not in _BINARY:
        raise e.error(f"Forge has no op for the element-wise function '{fn}'")
    return [call(e, _BINARY[fn], [op.lhs, op.rhs], op.output.type)]


@lowers("tir.where")
def _where(op, e):
    return [call(e, "Where", [op.condition, op.x, op.y], op.output.type)]


@lowers("tir.cast")
def _cast(op, e):
    return [call(e, "Cast", [op.input], op.output.type, dtype=op.output.type.element_type)]


@lowers("tir.clip")
def _clip(op, e):
    return [call(e, "Clip", [op.input], op.output.type, min=op.min.value.data, max=op.max.value.data)]


@lowers("tir.matmul")
def _matmul(op, e):
    return [call(e, "Matmul", [op.lhs, op.rhs], op.output.type)]


def _int_or_pair(values: list[int]):
    return values[0] if values[0] == values[1] else values


@lowers("tir.conv2d")
def _conv2d(op, e):
    return [
        call(
            e, "Conv2d", [op.input, op.weight, op.bias], op.output.type,
            stride=_ints(op.strides), padding=_ints(op.pads),
            dilation=_int_or_pair(_ints(op.dilations)), groups=op.groups.value.data,
        )
    ]


@lowers("tir.pool2d")
def _pool2d(op, e):
    top, left, bottom, right = _ints(op.pads)
    kernel, strides = _ints(op.kernel), _ints(op.strides)
    ceil_mode = bool(op.ceil_mode.value.data)
    x = op.input
    if op.kind.data == "max":
        return [
            call(
                e, "MaxPool2d", [x], op.output.type,
                kernel_size=_int_or_pair(kernel), stride=_int_or_pair(strides),
                padding=[left, right, top, bottom], dilation=_int_or_pair(_ints(op.dilations)),
                ceil_mode=ceil_mode,
            )
        ]
    include = bool(op.count_include_pad.value.data)
    if (top, left) == (bottom, right):
        return [
            call(
                e, "AvgPool2d", [x], op.output.type,
                kernel_size=kernel, stride=strides, padding=[left, right, top, bottom],
                ceil_mode=ceil_mode, count_include_pad=include,
            )
        ]
    # Forge's AvgPool2d asserts symmetric padding: pad explicitly, pool
    # counting the padding, and rescale by a compile-time window-size map
    # where the padding must not count.
    shape = _shape(x)
    padded = [shape[0], shape[1], shape[2] + top + bottom, shape[3] + left + right]
    x = call(e, "ConstantPad", [x], _t(x, padded), padding=[0, 0, 0, 0, top, bottom, left, right], value=0.0)
    y = call(
        e, "AvgPool2d", [x], op.output.type,
        kernel_size=kernel, stride=strides, padding=[0, 0, 0, 0], ceil_mode=ceil_mode, count_include_pad=True,
    )
    if include:
        return [y]
    return [call(e, "Multiply", [y, _window_scale(e, op, shape, kernel, strides, ceil_mode)], op.output.type)]


def _window_scale(e: Emitter, op, shape, kernel, strides, ceil_mode):
    """kernel area / the number of input (not padding) elements per window."""
    import numpy as np

    from forge_opt.interpreters.forge_kernels import avg_pool2d

    top, left, bottom, right = _ints(op.pads)
    inside = np.pad(np.ones((1, 1, shape[2], shape[3]), np.float32), ((0, 0), (0, 0), (top, bottom), (left, right)))
    share = avg_pool2d(inside, kernel, strides, [0, 0, 0, 0], ceil_mode, True)
    scale = (1.0 / share[0, 0]).astype(dtypes.numpy_dtype(op.output.type.element_type))
    attr = array_to_attr(scale)
    return e.value(
        forge.ConstantOp.build(
            result_types=[attr.type],
            properties={"constant_name": StringAttr(_constant_name(op)), "value": attr},
        )
    )


@lowers("tir.batchnorm")
def _batchnorm(op, e):
    return [
        call(e, "Batchnorm", [op.input, op.scale, op.bias, op.mean, op.var], op.output.type,
             epsilon=op.epsilon.value.data)
    ]


@lowers("tir.softmax")
def _softmax(op, e):
    fn = "LogSoftmax" if op.log.value.data else "Softmax"
    rank = len(_shape(op.input))
    return [call(e, fn, [op.input], op.output.type, dim=op.axis.value.data - rank)]


@lowers("tir.layernorm")
def _layernorm(op, e):
    return [call(e, "Layernorm", [op.input, op.scale, op.bias], op.output.type, dim=-1,
                 epsilon=op.epsilon.value.data)]


@lowers("tir.reshape")
def _reshape(op, e):
    return [reshape(e, op.input, _shape(op.output))]


def transpositions(perm: list[int]) -> list[tuple[int, int]]:
    """Swaps that turn the identity order into `perm`, applied in order."""
    current = list(range(len(perm)))
    swaps = []
    for i, want in enumerate(perm):
        j = current.index(want)
        if j != i:
            current[i], current[j] = current[j], current[i]
            swaps.append((i, j))
    return swaps


@lowers("tir.transpose")
def _transpose(op, e):
    x = op.input
    rank = len(_shape(x))
    for i, j in transpositions(_ints(op.perm)):
        shape = _shape(x)
        shape[i], shape[j] = shape[j], shape[i]
        x = call(e, "Transpose", [x], _t(x, shape), dim0=i - rank, dim1=j - rank)
    return [x]


@lowers("tir.concat")
def _concat(op, e):
    rank = len(_shape(op.output))
    return [call(e, "Concatenate", list(op.inputs), op.output.type, axis=op.axis.value.data - rank)]


_REDUCE = {"sum": "ReduceSum", "mean": "ReduceAvg", "max": "ReduceMax"}


@lowers("tir.reduce")
def _reduce(op, e):
    x = op.input
    rank = len(_shape(x))
    for axis in _ints(op.axes):
        shape = _shape(x)
        kept = list(shape)
        kept[axis] = 1
        if rank <= 4:
            x = call(e, _REDUCE[op.fn.data], [x], _t(x, kept), dim=axis - rank, keep_dim=True)
            continue
        # Forge reduces dims -4..3 only: fold the others around the axis.
        before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
        folded = reshape(e, x, [before, shape[axis], after])
        reduced = call(e, _REDUCE[op.fn.data], [folded], _t(x, [before, 1, after]), dim=-2, keep_dim=True)
        x = reshape(e, reduced, kept)
    return [reshape(e, x, _shape(op.output))]


@lowers("tir.argmax")
def _argmax(op, e):
    rank = len(_shape(op.input))
    return [
        call(e, "Argmax", [op.input], op.output.type, dim=op.axis.value.data - rank,
             keep_dim=bool(op.keepdims.value.data))
    ]


@lowers("tir.tile")
def _tile(op, e):
    return [call(e, "Repeat", [op.input], op.output.type, repeats=_ints(op.repeats))]


@lowers("tir.cumsum")
def _cumsum(op, e):
    return [call(e, "CumSum", [op.input], op.output.type, dim=op.axis.value.data)]


@lowers("tir.pad")
def _pad(op, e):
    return [call(e, "ConstantPad", [op.input], op.output.type, padding=_ints(op.pads), value=op.value.value.data)]


@lowers("tir.gather")
def _gather(op, e):
    data, indices = op.input, op.indices
    axis = op.axis.value.data
    dshape, ishape = _shape(data), _shape(indices)
    if axis == 0 and len(dshape) == 2:
        return [call(e, "Embedding", [indices, data], op.output.type)]
    count = 1
    for d in ishape:
        count *= d
    flat = reshape(e, indices, [count]) if len(ishape) != 1 else indices
    gshape = list(dshape)
    gshape[axis] = count
    gathered = call(e, "AdvIndex", [data, flat], _t(data, gshape), dim=axis)
    return [reshape(e, gathered, _shape(op.output))]


@lowers("tir.broadcast")
def _broadcast(op, e):
    x = op.input
    target = _shape(op.output)
    shape = _shape(x)
    if len(shape) < len(target):
        shape = [1] * (len(target) - len(shape)) + shape
        x = reshape(e, x, shape)
    rank = len(target)
    for i, (have, want) in enumerate(zip(shape, target)):
        if have != want:
            shape = list(shape)
            shape[i] = want
            x = call(e, "Broadcast", [x], _t(x, shape), dim=i - rank, shape=want)
    return [x]


@lowers("tir.strided_slice")
def _strided_slice(op, e):
    """One `forge.index` per sliced axis, chained; `dim` counted from the end."""
    rank = len(_shape(op.input))
    value = op.input
    for axis, begin, end, stride in op.slices():
        size = _shape(value)[axis]
        if (begin, end, stride) == (0, size, 1):
            continue
        # Forge asserts start < size; an empty piece at the very end is
        # the same empty slice taken one element earlier.
        if begin == end and begin == size:
            begin = end = size - 1
        shape = _shape(value)
        shape[axis] = len(range(begin, end, stride))
        value = call(e, "Index", [value], _t(value, shape), dim=axis - rank, start=begin, stop=end, stride=stride)
    return [value]


# What lowers an op that reaches the end of `tir-to-forge` unlowered.
_DECOMPOSED_BY = {"tir.split": "lower-split"}

_ALLOWED_DIALECTS = ("forge.", "func.", "builtin.")


def check_lowered(module: ModuleOp) -> None:
    """Raise for the first op that has no Forge form."""
    for op in module.walk():
        if op.name.startswith(_ALLOWED_DIALECTS):
            continue
        if op.name in _DECOMPOSED_BY:
            hint = f"run '{_DECOMPOSED_BY[op.name]}' before 'tir-to-forge'"
        elif op.name.startswith("tir."):
            hint = "tir-to-forge has no Forge lowering for it"
        elif op.name == "onnx.Custom":
            hint = f"ops of domain '{op.domain.data}' ({op.op_type.data}) are not supported"
        elif op.name.startswith("onnx."):
            hint = f"{op.name} has no lowering to Forge yet"
        else:
            hint = "it is not a Forge op"
        raise ForgeOptError(f"{describe(op)}: cannot be lowered to Forge: {hint}")


@dataclass(frozen=True)
class TirToForgePass(ModulePass):
    """Rewrite `tir` ops into `forge` ops and check that nothing else is left."""

    name = "tir-to-forge"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_in_order(op, table_rewrite(LOWERINGS, lambda o: o.name))
        erase_dead_ops(op)
        check_lowered(op)

