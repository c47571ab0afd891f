"""`tir-to-forge`: rewrite `tir` ops into `forge` ops, one per Forge call,
respecting what Forge's functions accept (one axis per Transpose, Reduce,
Index and Broadcast; explicit Conv2d padding; pooling padding as
[left, right, top, bottom]; negative dims).

After the rewrite only `forge`, `func` and `builtin` ops may remain: any
other op is an error naming it, its ONNX node and what would lower it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    FloatAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    TensorType,
    i1,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe, node_name
from forge_opt.dialects import forge, tir
from forge_opt.dialects import forge_ops as F
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.forge_functions import ForgeRuleError
from forge_opt.dialects.forge_functions.conv import avg_pool2d
from forge_opt.dialects.forge_functions.element_types import data_format
from forge_opt.dialects.onnx import CustomOp
from forge_opt.dialects.tir_functions import PoolKind, UnaryFn
from forge_opt.transforms.lowering import (
    Emitter,
    LoweringTable,
    Rewrite,
    erase_dead_ops,
    rewrite_in_order,
    table_rewrite,
)
from forge_opt.transforms.tir_forge_calls import BINARY, POOL, REDUCE, UNARY

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

P = ParamSpec("P")


def call(
    e: Emitter, result_type: Attribute, builder: Callable[P, forge.ForgeOp], *args: P.args, **kwargs: P.kwargs
) -> SSAValue:
    """One Forge call by its typed builder (`forge_ops`), checked once as it
    is built; a call Forge's own checks reject is an error naming the node.
    Its result has `result_type`'s shape (the `tir` value it stands for) and
    the element type Forge computes."""
    try:
        new = builder(*args, **kwargs)
    except ForgeRuleError as error:
        raise e.error(f"Forge cannot compute it: {error}") from None
    got = new.results[0].type
    if got is not result_type and dtypes.tensor(got).shape != dtypes.tensor(result_type).shape:
        raise e.error(
            f"forge.op.{new.FUNCTION.name} gives {got}, not the shape of the {result_type} it lowers"
        )
    return e.value(new)


def _shape(value) -> list[int]:
    return list(value.type.get_shape())


def _ints(attr) -> list[int]:
    return list(attr.get_values())


def _t(value, shape) -> TensorType:
    return TensorType(value.type.element_type, shape)


def reshape(e: Emitter, x, shape: list[int]):
    if _shape(x) == list(shape):
        return x
    return call(e, _t(x, shape), F.Reshape, x, shape=list(shape))


@lowers(tir.ConstantOp)
def _constant(op: tir.ConstantOp, e: Emitter):
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


@lowers(tir.FullOp)
def _full(op: tir.FullOp, e: Emitter):
    new = forge.ConstantOp.build(
        result_types=[op.output.type],
        properties={"constant_name": StringAttr(_constant_name(op)), "fill": op.fill},
    )
    return [e.value(new)]


@lowers(tir.UnaryOp)
def _unary(op: tir.UnaryOp, e: Emitter):
    fn = op.fn.data
    x = op.input
    if fn == UnaryFn.NEG:
        return [call(e, op.output.type, F.Multiply, x, scalar_constant(e, -1, x))]
    forge_call = UNARY[fn]
    return [call(e, op.output.type, forge_call.function, x, **forge_call.keywords)]


def scalar_constant(e: Emitter, value, like):
    """A 0-d constant of `like`'s element type, named after the op being lowered."""
    return constant(e, e.op, np.asarray(value, dtype=dtypes.numpy_dtype(dtypes.tensor(like.type).element_type)))


@lowers(tir.BinaryOp)
def _binary(op: tir.BinaryOp, e: Emitter):
    return [call(e, op.output.type, BINARY[op.fn.data].function, op.lhs, op.rhs)]


@lowers(tir.WhereOp)
def _where(op: tir.WhereOp, e: Emitter):
    return [call(e, op.output.type, F.Where, op.condition, op.x, op.y)]


@lowers(tir.CastOp)
def _cast(op: tir.CastOp, e: Emitter):
    target = dtypes.tensor(op.output.type).element_type
    if target == i1 and dtypes.tensor(op.input.type).element_type != i1:
        # Forge casts to bool as to Int32, truncating (0.5 -> 0); ONNX
        # means x != 0. The comparison's 0/1 is brought to Int32 by
        # `_in_tir_format` where a user needs it.
        return [call(e, op.output.type, F.NotEqual, op.input, scalar_constant(e, 0, op.input))]
    return [call(e, op.output.type, F.Cast, op.input, dtype=target)]


@lowers(tir.ClipOp)
def _clip(op: tir.ClipOp, e: Emitter):
    return [call(e, op.output.type, F.Clip, op.input, min=op.min.value.data, max=op.max.value.data)]


@lowers(tir.MatmulOp)
def _matmul(op: tir.MatmulOp, e: Emitter):
    return [call(e, op.output.type, F.Matmul, op.lhs, op.rhs, op.bias)]


def _int_or_pair(values: list[int]):
    return values[0] if values[0] == values[1] else values


@lowers(tir.Conv2dOp)
def _conv2d(op: tir.Conv2dOp, e: Emitter):
    return [
        call(
            e, op.output.type, F.Conv2d, op.input, op.weight, op.bias,
            stride=_ints(op.strides), padding=_ints(op.pads),
            dilation=_int_or_pair(_ints(op.dilations)), groups=op.groups.value.data,
        )
    ]


@lowers(tir.ConvTranspose2dOp)
def _conv_transpose2d(op: tir.ConvTranspose2dOp, e: Emitter):
    ph, pw = _ints(op.pads)
    return [
        call(
            e, op.output.type, F.Conv2dTranspose, op.input, op.weight, op.bias,
            stride=_int_or_pair(_ints(op.strides)),
            padding=ph if ph == pw else [ph, pw, ph, pw],  # the wrapper's symmetric (top, left, bottom, right)
            dilation=_int_or_pair(_ints(op.dilations)), groups=op.groups.value.data,
            output_padding=_int_or_pair(_ints(op.output_padding)),
        )
    ]


def pad_last_two(e: Emitter, x, top: int, bottom: int, left: int, right: int, value: float):
    """Forge's Pad on the last two dims (F.pad order); nothing for no padding."""
    if not any((top, bottom, left, right)):
        return x
    shape = _shape(x)
    shape[-2] += top + bottom
    shape[-1] += left + right
    return call(e, _t(x, shape), F.Pad, x, pad=[left, right, top, bottom], mode="constant", value=float(value))


def _floor_padding(size: int, out: int, span: int, stride: int, lo: int, hi: int) -> int:
    """The end padding that gives exactly `out` windows without ceil_mode:
    at least `hi`, more where ceil_mode made windows past it."""
    return max(hi, (out - 1) * stride + span - size - lo)


@lowers(tir.Pool2dOp)
def _pool2d(op: tir.Pool2dOp, e: Emitter):
    """Forge pools take symmetric padding and no ceil_mode (rules
    pool-symmetric, pool-flags): other cases pad explicitly first, with the
    pool's identity, to exactly the windows wanted."""
    top, left, bottom, right = _ints(op.pads)
    kernel, strides, dilations = _ints(op.kernel), _ints(op.strides), _ints(op.dilations)
    ceil_mode = bool(op.ceil_mode.value.data)
    x = op.input
    shape, out = _shape(x), _shape(op.output)
    if dilations != [1, 1]:
        raise e.error(f"Forge's pooling supports dilation 1 only, not {dilations}")
    is_max = op.kind.data == PoolKind.MAX
    symmetric = (top, left) == (bottom, right) and not ceil_mode
    if symmetric:
        padding = [left, right, top, bottom]
    else:
        bottom = _floor_padding(shape[2], out[2], kernel[0], strides[0], top, bottom)
        right = _floor_padding(shape[3], out[3], kernel[1], strides[1], left, right)
        x = pad_last_two(e, x, top, bottom, left, right, -math.inf if is_max else 0.0)
        padding = [0, 0, 0, 0]
    if is_max:
        return [
            call(
                e, op.output.type, POOL[PoolKind.MAX].function, x,
                kernel_size=kernel[0] if kernel[0] == kernel[1] else tuple(kernel),
                stride=_int_or_pair(strides), padding=padding, ceil_mode=False,
            )
        ]
    include = bool(op.count_include_pad.value.data)
    y = call(
        e, op.output.type, POOL[PoolKind.AVG].function, x,
        kernel_size=kernel, stride=strides, padding=padding, ceil_mode=False,
        count_include_pad=include if symmetric else True,
    )
    if symmetric:
        return [y]
    scale = _window_scale(op, shape, kernel, strides, (top, bottom, left, right), include, ceil_mode)
    if scale is None:
        return [y]
    return [call(e, op.output.type, F.Multiply, y, constant(e, op, scale))]


def _window_scale(op, shape, kernel, strides, padded, include, ceil_mode):
    """Per output position, what the explicitly padded pool (which divides
    by the whole kernel) must be multiplied by to give the wanted average;
    None where that is 1 everywhere."""

    top, left, bottom, right = _ints(op.pads)
    ones = np.ones((1, 1, shape[2], shape[3]), np.float64)
    wanted = avg_pool2d(ones, kernel, strides, [left, right, top, bottom], ceil_mode, include)
    p_top, p_bottom, p_left, p_right = padded
    inside = np.pad(ones, ((0, 0), (0, 0), (p_top, p_bottom), (p_left, p_right)))
    emitted = avg_pool2d(inside, kernel, strides, [0, 0, 0, 0], False, True)
    scale = np.divide(wanted, emitted, out=np.zeros_like(wanted), where=emitted != 0)[0, 0]
    if np.allclose(scale, 1.0):
        return None
    return scale.astype(dtypes.numpy_dtype(op.output.type.element_type))


def constant(e: Emitter, op, array):
    """A computed constant, named after the op's ONNX node."""
    attr = array_to_attr(array)
    return e.value(
        forge.ConstantOp.build(
            result_types=[attr.type],
            properties={"constant_name": StringAttr(_constant_name(op)), "value": attr},
        )
    )


@lowers(tir.BatchnormOp)
def _batchnorm(op: tir.BatchnormOp, e: Emitter):
    return [
        call(e, op.output.type, F.Batchnorm, op.input, op.scale, op.bias, op.mean, op.var,
             epsilon=op.epsilon.value.data)
    ]


@lowers(tir.SoftmaxOp)
def _softmax(op: tir.SoftmaxOp, e: Emitter):
    fn = F.LogSoftmax if op.log.value.data else F.Softmax
    rank = len(_shape(op.input))
    return [call(e, op.output.type, fn, op.input, dim=op.axis.value.data - rank)]


@lowers(tir.LayernormOp)
def _layernorm(op: tir.LayernormOp, e: Emitter):
    return [call(e, op.output.type, F.Layernorm, op.input, op.scale, op.bias, dim=-1,
                 epsilon=op.epsilon.value.data)]


@lowers(tir.ReshapeOp)
def _reshape(op: tir.ReshapeOp, e: Emitter):
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


@lowers(tir.TransposeOp)
def _transpose(op: tir.TransposeOp, e: Emitter):
    x = op.input
    rank = len(_shape(x))
    for i, j in transpositions(_ints(op.perm)):
        shape = _shape(x)
        shape[i], shape[j] = shape[j], shape[i]
        x = call(e, _t(x, shape), F.Transpose, x, dim0=i - rank, dim1=j - rank)
    return [x]


@lowers(tir.ConcatOp)
def _concat(op: tir.ConcatOp, e: Emitter):
    rank = len(_shape(op.output))
    return [call(e, op.output.type, F.Concatenate, *op.inputs, axis=op.axis.value.data - rank)]


@lowers(tir.ReduceOp)
def _reduce(op: tir.ReduceOp, e: Emitter):
    x = op.input
    rank = len(_shape(x))
    for axis in _ints(op.axes):
        shape = _shape(x)
        kept = list(shape)
        kept[axis] = 1
        if rank <= 4:
            x = call(e, _t(x, kept), REDUCE[op.fn.data].function, x, dim=axis - rank, keep_dim=True)
            continue
        # Forge reduces dims -4..3 only: fold the others around the axis.
        before, after = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
        folded = reshape(e, x, [before, shape[axis], after])
        reduced = call(
            e, _t(x, [before, 1, after]), REDUCE[op.fn.data].function, folded, dim=-2, keep_dim=True
        )
        x = reshape(e, reduced, kept)
    return [reshape(e, x, _shape(op.output))]


@lowers(tir.ArgmaxOp)
def _argmax(op: tir.ArgmaxOp, e: Emitter):
    rank = len(_shape(op.input))
    return [
        call(e, op.output.type, F.Argmax, op.input, dim=op.axis.value.data - rank,
             keep_dim=bool(op.keepdims.value.data))
    ]


@lowers(tir.TileOp)
def _tile(op: tir.TileOp, e: Emitter):
    return [call(e, op.output.type, F.Repeat, op.input, repeats=_ints(op.repeats))]


@lowers(tir.CumsumOp)
def _cumsum(op: tir.CumsumOp, e: Emitter):
    return [call(e, op.output.type, F.CumSum, op.input, dim=op.axis.value.data)]


@lowers(tir.PadOp)
def _pad(op: tir.PadOp, e: Emitter):
    """Forge's Pad on the last two dims; other dims by concatenating filled
    constants (ConstantPad cannot be called: rule constantpad-unusable)."""
    pads, value, x = _ints(op.pads), op.value.value.data, op.input
    rank = len(_shape(x))
    for axis in range(rank - 2):
        lo, hi = pads[2 * axis], pads[2 * axis + 1]
        if lo or hi:
            x = _concat_fill(e, op, x, axis, lo, hi, value)
    last = pads[2 * (rank - 2) :] if rank >= 2 else [0, 0] + pads
    top, bottom, left, right = last
    return [pad_last_two(e, x, top, bottom, left, right, value) if rank >= 2 else
            _concat_fill(e, op, x, 0, left, right, value)]


def _fill_attr(value: float, like):
    elem = like.type.element_type
    if isinstance(elem, IntegerType):
        return IntegerAttr(int(value), elem)
    return FloatAttr(float(value), elem)


def _concat_fill(e: Emitter, op, x, axis: int, lo: int, hi: int, value: float):
    """`x` with `lo` and `hi` slices of `value` added along `axis`."""
    parts = []
    for count in (lo, hi):
        shape = _shape(x)
        shape[axis] = count
        if count:
            fill = forge.ConstantOp.build(
                result_types=[_t(x, shape)],
                properties={"constant_name": StringAttr(_constant_name(op)), "fill": _fill_attr(value, x)},
            )
            parts.append(e.value(fill))
        else:
            parts.append(None)
    shape = _shape(x)
    shape[axis] += lo + hi
    operands = [v for v in (parts[0], x, parts[1]) if v is not None]
    return call(e, _t(x, shape), F.Concatenate, *operands, axis=axis - len(shape))


@lowers(tir.GatherOp)
def _gather(op: tir.GatherOp, e: Emitter):
    data, indices = op.input, op.indices
    axis = op.axis.value.data
    dshape, ishape = _shape(data), _shape(indices)
    if axis == 0 and len(dshape) == 2:
        return [call(e, op.output.type, F.Embedding, indices, data)]
    count = 1
    for d in ishape:
        count *= d
    flat = reshape(e, indices, [count]) if len(ishape) != 1 else indices
    gshape = list(dshape)
    gshape[axis] = count
    gathered = call(e, _t(data, gshape), F.AdvIndex, data, flat, dim=axis)
    return [reshape(e, gathered, _shape(op.output))]


@lowers(tir.BroadcastOp)
def _broadcast(op: tir.BroadcastOp, e: Emitter):
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
            x = call(e, _t(x, shape), F.Broadcast, x, dim=i - rank, shape=want)
    return [x]


@lowers(tir.StridedSliceOp)
def _strided_slice(op: tir.StridedSliceOp, e: Emitter):
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
        value = call(e, _t(value, shape), F.Index, value, dim=axis - rank, start=begin, stop=end, stride=stride)
    return [value]


# What lowers an op that reaches the end of `tir-to-forge` unlowered.
DECOMPOSED_BY = {"tir.split": "lower-split"}

# `shard`: a tensor-parallel program's grid, its blocks of the weights and
# the collectives between its devices' calls (tp-partition's) stay as they are
_ALLOWED_DIALECTS = ("forge.", "func.", "builtin.", "shard.")


def check_lowered(module: ModuleOp) -> None:
    """Raise for the first op that has no Forge form."""
    for op in module.walk():
        if op.name.startswith(_ALLOWED_DIALECTS):
            continue
        if op.name in DECOMPOSED_BY:
            hint = f"run '{DECOMPOSED_BY[op.name]}' before 'tir-to-forge'"
        elif op.name.startswith("tir."):
            hint = "tir-to-forge has no Forge lowering for it"
        elif isinstance(op, CustomOp):
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
        rewrite_in_order(op, tir_to_forge_rewrite())
        erase_dead_ops(op)
        check_lowered(op)
        for func in op.body.block.ops:  # functions are the module's own ops
            if isinstance(func, FuncOp):
                _return_forge_types(func)


def tir_to_forge_rewrite() -> Rewrite:
    """The rewrite of one `tir` op into Forge calls (the pass's, alone)."""
    return _in_tir_format(table_rewrite(LOWERINGS))


def _format(t) -> str | None:
    return _element_format(t.element_type)


@functools.lru_cache(maxsize=64)
def _element_format(element_type) -> str | None:
    try:
        return data_format(dtypes.numpy_dtype(element_type))
    except dtypes.UnsupportedElementType:
        return None


def _any_format(use) -> bool:
    """A use that reads 0/1 in any element type: Where's condition (its golden
    casts it to bool, op_where.cpp)."""
    return isinstance(use.operation, tir.WhereOp) and use.index == 0


def _in_tir_format(rewrite):
    """Where Forge computes a value in another DataFormat than the `tir` value
    it replaces (a comparison keeps its first operand's type, integer Divide
    gives float32), cast it back, so users and outputs see the format ONNX
    gives; Forge's Cast to an integer type truncates toward zero, which is
    ONNX's integer division."""

    def wrapped(op):
        replacement = rewrite(op)
        if replacement is None:
            return None
        new_ops, values = replacement
        values = list(values)
        for i, (old, new) in enumerate(zip(op.results, values)):
            if new is None or old.type is new.type or _format(old.type) in (_format(new.type), None):
                continue
            if all(_any_format(use) for use in old.uses):
                continue
            cast = F.Cast(new, dtype=old.type.element_type)
            cast.location = op.location
            new_ops = [*new_ops, cast]
            values[i] = cast.results[0]
        return new_ops, values

    return wrapped


def _return_forge_types(func: FuncOp) -> None:
    """The function returns what Forge computes (bool and int64 as int32)."""
    ret = func.body.block.last_op
    if isinstance(ret, ReturnOp):
        outputs = [v.type for v in ret.arguments]
        if outputs != list(func.function_type.outputs.data):
            func.function_type = FunctionType.from_lists(list(func.function_type.inputs.data), outputs)

