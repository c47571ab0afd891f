"""Reductions: ONNX's ReduceX as `tir.reduce` with element-wise steps
around it, the products Forge has no reduction for (ReduceProd, CumProd) as
slices multiplied, ReduceLogSumExp kept from overflowing, ArgMax/ArgMin."""

from __future__ import annotations

from typing import cast

import numpy as np
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType, i1

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.transforms.lowering import LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _reduce_axes(op, e) -> list[int] | None:
    """The axes to reduce, or None for no reduction at all."""
    shape = static_shape(op.data, e)
    axes = [] if op.axes is None else e.constant_ints(op.axes, "axes")
    if not axes:
        return None if op.noop_with_empty_axes.value.data else list(range(len(shape)))
    return [normalize_axis(a, len(shape), e) for a in axes]


def _reduction(fn: ReduceFn, before=None, after=None):
    """ReduceX as tir.reduce `fn`, with element-wise steps before and after."""

    def lower(op, e):
        axes = _reduce_axes(op, e)
        x = op.data
        if before is not None:
            x = before(e, x)
        if axes is None:
            y = x
        else:
            y = e.reduce(fn, x, axes, bool(op.keepdims.value.data))
        return [after(e, y) if after is not None else y]

    return lower


def _square(e, x):
    return e.binary(BinaryFn.MUL, x, x)


def _neg(e, x):
    """min = -max(-x); for booleans the negation is `not` (-True is True)."""
    return e.unary(UnaryFn.NOT if x.type.element_type == i1 else UnaryFn.NEG, x)


LOWERINGS.update(
    {
        onnx.ReduceSumOp: _reduction(ReduceFn.SUM),
        onnx.ReduceMeanOp: _reduction(ReduceFn.MEAN),
        onnx.ReduceMaxOp: _reduction(ReduceFn.MAX),
        onnx.ReduceMinOp: _reduction(ReduceFn.MAX, _neg, _neg),
        onnx.ReduceSumSquareOp: _reduction(ReduceFn.SUM, _square),
        onnx.ReduceL1Op: _reduction(ReduceFn.SUM, lambda e, x: e.unary(UnaryFn.ABS, x)),
        onnx.ReduceL2Op: _reduction(ReduceFn.SUM, _square, lambda e, y: e.unary(UnaryFn.SQRT, y)),
        onnx.ReduceLogSumOp: _reduction(ReduceFn.SUM, None, lambda e, y: e.unary(UnaryFn.LOG, y)),
    }
)


_PRODUCT_LIMIT = 64  # slices multiplied per reduced axis


@lowers(onnx.ReduceProdOp)
def _reduce_prod(op: onnx.ReduceProdOp, e: TirEmitter):
    """Forge has no product reduction: the slices along each reduced axis,
    multiplied. Exact, for integers too, unlike exp(sum(log))."""
    axes = _reduce_axes(op, e)
    if axes is None:
        return [op.data]
    shape = static_shape(op.data, e)
    x = op.data
    for axis in sorted(set(axes)):
        if not 0 < shape[axis] <= _PRODUCT_LIMIT:
            raise e.error(f"a product over {shape[axis]} elements is not supported (1 to {_PRODUCT_LIMIT})")
        product = e.slice(x, [axis], [0], [1], [1])
        for i in range(1, shape[axis]):
            piece = e.slice(x, [axis], [i], [i + 1], [1])
            product = e.binary(BinaryFn.MUL, product, piece)
        x = product
    if not op.keepdims.value.data:
        x = e.reshape(x, [d for i, d in enumerate(shape) if i not in axes])
    return [x]


@lowers(onnx.CumProdOp)
def _cumprod(op: onnx.CumProdOp, e: TirEmitter):
    """Running products of the slices along the axis, joined again (Forge
    has CumSum only; exclusive shifts in a 1, reverse runs from the end)."""
    shape = static_shape(op.x, e)
    axis = normalize_axis(e.constant_ints(op.axis, "axis")[0], len(shape), e)
    if not 0 < shape[axis] <= _PRODUCT_LIMIT:
        raise e.error(f"a running product over {shape[axis]} elements is not supported (1 to {_PRODUCT_LIMIT})")
    positions = list(range(shape[axis]))
    if op.reverse.value.data:
        positions.reverse()
    running, product = [], None
    for i in positions:
        piece = e.slice(op.x, [axis], [i], [i + 1], [1])
        if op.exclusive.value.data:
            running.append(product if product is not None else _ones_like(e, piece))
        product = piece if product is None else e.binary(BinaryFn.MUL, product, piece)
        if not op.exclusive.value.data:
            running.append(product)
    if op.reverse.value.data:
        running.reverse()
    return [running[0] if len(running) == 1 else e.concat(running, axis)]


def _ones_like(e: TirEmitter, x):
    t = dtypes.tensor(x.type)
    elem = t.element_type
    one = IntegerAttr(1, elem) if isinstance(elem, IntegerType) else FloatAttr(1.0, cast(AnyFloat, elem))
    return e.value(tir.FullOp(one, t))


@lowers(onnx.ReduceLogSumExpOp)
def _reduce_log_sum_exp(op: onnx.ReduceLogSumExpOp, e: TirEmitter):
    # m + log(sum(exp(x - m))) with m the maximum over the axes, so that exp
    # never overflows (float32's exp does past 88)
    axes = _reduce_axes(op, e)
    if axes is None:
        return [op.data]  # log(exp(x))
    keep = bool(op.keepdims.value.data)
    shape = static_shape(op.data, e)
    if any(shape[a] == 0 for a in axes):  # an empty sum: log(0) = -inf, no maximum to take
        return [e.unary(UnaryFn.LOG, e.reduce(ReduceFn.SUM, e.unary(UnaryFn.EXP, op.data), axes, keep))]
    m = e.reduce(ReduceFn.MAX, op.data, axes, True)
    total = e.reduce(ReduceFn.SUM, e.unary(UnaryFn.EXP, e.binary(BinaryFn.SUB, op.data, m)), axes, keep)
    return [e.binary(BinaryFn.ADD, e.unary(UnaryFn.LOG, total), e.reshape(m, static_shape(total, e)))]


@lowers(onnx.ArgMaxOp, onnx.ArgMinOp)
def _argmax(op: onnx.ArgMaxOp | onnx.ArgMinOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    x = op.data if isinstance(op, onnx.ArgMaxOp) else e.unary(UnaryFn.NEG, op.data)
    keepdims = bool(op.keepdims.value.data)
    if not op.select_last_index.value.data:
        return [e.value(tir.ArgmaxOp(x, axis, keepdims))]
    # Forge's Argmax takes the first maximum: the last one is the first of
    # the reversed axis, counted back from the end.
    reversed_positions = e.constant(np.arange(shape[axis] - 1, -1, -1, dtype=np.int64))
    first = e.value(tir.ArgmaxOp(e.gather(x, reversed_positions, axis), axis, keepdims))
    last = e.constant(np.array(shape[axis] - 1, dtype=np.int64))
    return [e.binary(BinaryFn.SUB, last, first)]
