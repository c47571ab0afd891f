"""Lowerings of ONNX's data-movement ops to `tir`: reshapes, transposes,
concatenation, split, slice, expand, pad, reductions (gathers, scatters
and OneHot are in `gather_scatter.py`)."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType, Signedness, i1

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.dialects.tir_shapes import broadcast, split_sections
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, as_ints, normalize_axis, static_shape
from forge_opt.transforms.onnx_lowerings.nn import reduce
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def required_constant(e: TirEmitter, value, what: str) -> np.ndarray:
    """The compile-time value of an input Forge needs static."""
    array = constant_array(value)
    if array is None:
        raise e.error(f"the '{what}' input must be a compile-time constant")
    return array


def constant_ints(e: TirEmitter, value, what: str) -> list[int]:
    return as_ints(required_constant(e, value, what))


def reshape(e: TirEmitter, x, shape: list[int]):
    if static_shape(x, e) == list(shape):
        return x
    return e.value(tir.ReshapeOp(x, shape))


@lowers(onnx.ReshapeOp)
def _reshape(op: onnx.ReshapeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    target = constant_ints(e, op.shape, "shape")
    out = []
    for i, d in enumerate(target):
        if d == 0 and not op.allowzero.value.data:
            d = shape[i]
        out.append(d)
    if out.count(-1) > 1:
        raise e.error(f"shape {target} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(shape) // known if known else 0
    if math.prod(out) != math.prod(shape):
        raise e.error(f"cannot reshape {shape} into {target}")
    return [reshape(e, op.data, out)]


@lowers(onnx.FlattenOp)
def _flatten(op: onnx.FlattenOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    axis = op.axis.value.data
    axis = axis + len(shape) if axis < 0 else axis
    return [reshape(e, op.input, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


@lowers(onnx.SqueezeOp)
def _squeeze(op: onnx.SqueezeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    if op.axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [normalize_axis(a, len(shape), e) for a in constant_ints(e, op.axes, "axes")]
    for a in axes:
        if shape[a] != 1:
            raise e.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [reshape(e, op.data, [d for i, d in enumerate(shape) if i not in axes])]


@lowers(onnx.UnsqueezeOp)
def _unsqueeze(op: onnx.UnsqueezeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    axes = constant_ints(e, op.axes, "axes")
    rank = len(shape) + len(axes)
    axes = sorted(normalize_axis(a, rank, e) for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return [reshape(e, op.data, out)]


@lowers(onnx.TransposeOp)
def _transpose(op: onnx.TransposeOp, e: TirEmitter):
    rank = len(static_shape(op.data, e))
    perm = list(op.perm.get_values()) if op.perm is not None else list(reversed(range(rank)))
    if perm == list(range(rank)):
        return [op.data]
    return [e.value(tir.TransposeOp(op.data, perm))]


@lowers(onnx.ConcatOp)
def _concat(op: onnx.ConcatOp, e: TirEmitter):
    shapes = [static_shape(v, e) for v in op.inputs]
    axis = normalize_axis(op.axis.value.data, len(shapes[0]), e)
    inputs = [v for v, s in zip(op.inputs, shapes) if s[axis] != 0]
    if len(inputs) == 1:
        return [inputs[0]]
    return [e.value(tir.ConcatOp(inputs, axis))]


@lowers(onnx.SplitOp)
def _split(op: onnx.SplitOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    dim = shape[axis]
    count = len(op.outputs)
    try:
        if op.split is not None:
            sections = constant_ints(e, op.split, "split")
            if len(sections) != count:
                raise e.error(f"'split' has {len(sections)} sizes but the node has {count} outputs")
            if sum(sections) != dim or any(s < 0 for s in sections):
                raise e.error(f"split sizes {sections} do not sum to dimension {axis} of size {dim}")
        elif op.num_outputs is not None:
            parts = op.num_outputs.value.data
            sections = split_sections(dim, size=-(-dim // parts))
            if len(sections) != parts:
                raise e.error(f"dimension {axis} of size {dim} cannot be split into {parts} parts")
        else:
            sections = split_sections(dim, parts=count)
    except ValueError as err:
        raise e.error(str(err)) from None
    return list(e.add(tir.SplitOp(op.input, axis, sections)).results)


@lowers(onnx.SliceOp)
def _slice(op: onnx.SliceOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    starts = constant_ints(e, op.starts, "starts")
    ends = constant_ints(e, op.ends, "ends")
    axes = constant_ints(e, op.axes, "axes") if op.axes is not None else list(range(len(starts)))
    steps = constant_ints(e, op.steps, "steps") if op.steps is not None else [1] * len(starts)
    sl_axes, begins, stops, strides = [], [], [], []
    for a, b, en, s in zip(axes, starts, ends, steps):
        a = normalize_axis(a, len(shape), e)
        if s == 0:
            raise e.error("a step of 0 is not valid")
        if s < 0:
            return [_reverse_slice(e, op.data, shape, axes, starts, ends, steps)]
        b, en, _ = slice(b, en, s).indices(shape[a])
        en = max(en, b)
        if (b, en, s) == (0, shape[a], 1):
            continue
        sl_axes.append(a)
        begins.append(b)
        stops.append(en)
        strides.append(s)
    if not sl_axes:
        return [op.data]
    return [e.value(tir.StridedSliceOp(op.data, sl_axes, begins, stops, strides))]


def _reverse_slice(e, data, shape, axes, starts, ends, steps):
    """A slice with a negative step: the positions it takes along each axis
    are known, so it is a gather of constant indices per axis."""
    x = data
    for a, b, en, s in zip(axes, starts, ends, steps):
        a = a % len(shape)
        idx = np.arange(shape[a])[slice(b, en, s)]
        if list(idx) == list(range(shape[a])):
            continue
        x = e.value(tir.GatherOp(x, e.value(tir.ConstantOp(array_to_attr(idx.astype(np.int64)))), a))
    return x


@lowers(onnx.TileOp)
def _tile(op: onnx.TileOp, e: TirEmitter):
    static_shape(op.input, e)
    return [e.value(tir.TileOp(op.input, constant_ints(e, op.repeats, "repeats")))]


@lowers(onnx.DepthToSpaceOp)
def _depth_to_space(op: onnx.DepthToSpaceOp, e: TirEmitter):
    n, c, h, w = static_shape(op.input, e)
    b = op.blocksize.value.data
    if op.mode.data == "DCR":
        x = reshape(e, op.input, [n, b, b, c // (b * b), h, w])
        perm = [0, 3, 4, 1, 5, 2]
    else:  # CRD
        x = reshape(e, op.input, [n, c // (b * b), b, b, h, w])
        perm = [0, 1, 4, 2, 5, 3]
    x = e.value(tir.TransposeOp(x, perm))
    return [reshape(e, x, [n, c // (b * b), h * b, w * b])]


@lowers(onnx.SpaceToDepthOp)
def _space_to_depth(op: onnx.SpaceToDepthOp, e: TirEmitter):
    n, c, h, w = static_shape(op.input, e)
    b = op.blocksize.value.data
    x = reshape(e, op.input, [n, c, h // b, b, w // b, b])
    perm = [0, 1, 3, 5, 2, 4] if op.mode.data == "CRD" else [0, 3, 5, 1, 2, 4]
    x = e.value(tir.TransposeOp(x, perm))
    return [reshape(e, x, [n, c * b * b, h // b, w // b])]


@lowers(onnx.CumSumOp)
def _cumsum(op: onnx.CumSumOp, e: TirEmitter):
    shape = static_shape(op.x, e)
    axis = normalize_axis(constant_ints(e, op.axis, "axis")[0], len(shape), e)
    x = op.x
    reverse = op.reverse.value.data
    if reverse:
        x = _reverse_slice(e, x, shape, [axis], [-1], [-(shape[axis] + 1)], [-1])
    y = e.value(tir.CumsumOp(x, axis))
    if op.exclusive.value.data:
        y = e.binary(BinaryFn.SUB, y, x)
    if reverse:
        y = _reverse_slice(e, y, shape, [axis], [-1], [-(shape[axis] + 1)], [-1])
    return [y]


@lowers(onnx.ExpandOp)
def _expand(op: onnx.ExpandOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    target = broadcast(shape, constant_ints(e, op.shape, "shape"))
    if target == shape:
        return [op.input]
    return [e.value(tir.BroadcastOp(op.input, target))]


#: numpy's np.pad modes that copy the input's own elements, by ONNX mode.
_COPYING_PADS = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@lowers(onnx.PadOp)
def _pad(op: onnx.PadOp, e: TirEmitter):
    mode = op.mode.data
    if mode != "constant" and mode not in _COPYING_PADS:
        raise e.error(f"mode '{mode}' is not supported (constant, reflect, edge, wrap)")
    shape = static_shape(op.data, e)
    rank = len(shape)
    pads = constant_ints(e, op.pads, "pads")
    axes = (
        [normalize_axis(a, rank, e) for a in constant_ints(e, op.axes, "axes")]
        if op.axes is not None
        else list(range(rank))
    )
    value = 0.0
    if op.constant_value is not None:
        array = required_constant(e, op.constant_value, "constant_value")
        value = float(array.reshape(-1)[0]) if array.size else 0.0
    n = len(axes)
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[2 * a], full[2 * a + 1] = pads[i], pads[n + i]
    if any(p < 0 for p in full):
        raise e.error("negative pads are not supported")
    if not any(full):
        return [op.data]
    if mode != "constant":
        return [_copying_pad(e, op.data, shape, full, mode)]
    return [e.value(tir.PadOp(op.data, full, value))]


def _copying_pad(e: TirEmitter, x, shape: list[int], full: list[int], mode: str):
    """Reflect, edge and wrap padding copy input elements: along each padded
    axis, a gather of the positions np.pad would copy."""
    for axis, size in enumerate(shape):
        lo, hi = full[2 * axis], full[2 * axis + 1]
        if not lo and not hi:
            continue
        if mode == "reflect" and (size < 2 or max(lo, hi) >= size):
            raise e.error(f"reflect padding of {max(lo, hi)} needs more than {max(lo, hi)} elements on axis {axis}")
        if size == 0:
            raise e.error(f"{mode} padding of an empty axis {axis}")
        positions = np.pad(np.arange(size), (lo, hi), mode=_COPYING_PADS[mode])  # pyright: ignore[reportCallIssue,reportArgumentType]
        x = e.value(tir.GatherOp(x, e.value(tir.ConstantOp(array_to_attr(positions.astype(np.int64)))), axis))
    return x


def _reduce_axes(op, e) -> list[int] | None:
    """The axes to reduce, or None for no reduction at all."""
    shape = static_shape(op.data, e)
    axes = [] if op.axes is None else constant_ints(e, op.axes, "axes")
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
            y = reduce(e, fn, x, axes, bool(op.keepdims.value.data))
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
        product = e.value(tir.StridedSliceOp(x, [axis], [0], [1], [1]))
        for i in range(1, shape[axis]):
            piece = e.value(tir.StridedSliceOp(x, [axis], [i], [i + 1], [1]))
            product = e.binary(BinaryFn.MUL, product, piece)
        x = product
    if not op.keepdims.value.data:
        x = reshape(e, x, [d for i, d in enumerate(shape) if i not in axes])
    return [x]


@lowers(onnx.CumProdOp)
def _cumprod(op: onnx.CumProdOp, e: TirEmitter):
    """Running products of the slices along the axis, joined again (Forge
    has CumSum only; exclusive shifts in a 1, reverse runs from the end)."""
    shape = static_shape(op.x, e)
    axis = normalize_axis(constant_ints(e, op.axis, "axis")[0], len(shape), e)
    if not 0 < shape[axis] <= _PRODUCT_LIMIT:
        raise e.error(f"a running product over {shape[axis]} elements is not supported (1 to {_PRODUCT_LIMIT})")
    positions = list(range(shape[axis]))
    if op.reverse.value.data:
        positions.reverse()
    running, product = [], None
    for i in positions:
        piece = e.value(tir.StridedSliceOp(op.x, [axis], [i], [i + 1], [1]))
        if op.exclusive.value.data:
            running.append(product if product is not None else _ones_like(e, piece))
        product = piece if product is None else e.binary(BinaryFn.MUL, product, piece)
        if not op.exclusive.value.data:
            running.append(product)
    if op.reverse.value.data:
        running.reverse()
    return [running[0] if len(running) == 1 else e.value(tir.ConcatOp(running, axis))]


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
        return [e.unary(UnaryFn.LOG, reduce(e, ReduceFn.SUM, e.unary(UnaryFn.EXP, op.data), axes, keep))]
    m = reduce(e, ReduceFn.MAX, op.data, axes, True)
    total = reduce(e, ReduceFn.SUM, e.unary(UnaryFn.EXP, e.binary(BinaryFn.SUB, op.data, m)), axes, keep)
    return [e.binary(BinaryFn.ADD, e.unary(UnaryFn.LOG, total), reshape(e, m, static_shape(total, e)))]


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
    reversed_positions = e.value(tir.ConstantOp(array_to_attr(np.arange(shape[axis] - 1, -1, -1, dtype=np.int64))))
    first = e.value(tir.ArgmaxOp(e.value(tir.GatherOp(x, reversed_positions, axis)), axis, keepdims))
    last = e.value(tir.ConstantOp(array_to_attr(np.array(shape[axis] - 1, dtype=np.int64))))
    return [e.binary(BinaryFn.SUB, last, first)]


@lowers(onnx.TopKOp)
def _top_k(op: onnx.TopKOp, e: TirEmitter):
    """K rounds of: the (first) maximum along the axis and where it is, then
    that position masked out with -inf. Ties go to the lower index, as ONNX
    asks; the smallest K are the largest K of -x. Results come sorted."""
    shape = static_shape(op.X, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    k_value = constant_array(op.K)
    if k_value is None:
        raise e.error("the 'K' input must be a compile-time constant")
    k = int(np.asarray(k_value).reshape(-1)[0])
    if not 0 <= k <= shape[axis]:
        raise e.error(f"K = {k} is outside [0, {shape[axis]}] for axis {axis} of size {shape[axis]}")
    largest = bool(op.largest.value.data)
    x = op.X if largest else e.unary(UnaryFn.NEG, op.X)
    positions = np.arange(shape[axis], dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    position = e.value(tir.ConstantOp(array_to_attr(positions)))
    element = dtypes.tensor(op.X.type).element_type
    lowest = e.value(tir.FullOp(_lowest(element), dtypes.tensor_type(element, [])))
    values, indices = [], []
    for round_ in range(k):
        where = e.value(tir.ArgmaxOp(x, axis, True))
        best = reduce(e, ReduceFn.MAX, x, [axis], True)
        values.append(best if largest else e.unary(UnaryFn.NEG, best))
        indices.append(where)
        if round_ < k - 1:
            x = e.value(tir.WhereOp(e.binary(BinaryFn.EQ, position, where), lowest, x))
    if k == 1:
        return [values[0], indices[0]]
    return [e.value(tir.ConcatOp(values, axis)), e.value(tir.ConcatOp(indices, axis))]


def _lowest(element):
    """The fill that never wins a maximum: -inf for floats, the type's least integer else."""
    if isinstance(element, IntegerType):
        unsigned = element.signedness.data == Signedness.UNSIGNED
        return IntegerAttr(0 if unsigned else -(1 << (element.width.data - 1)), element)
    return FloatAttr(-math.inf, cast(AnyFloat, element))


@lowers(onnx.HardmaxOp)
def _hardmax(op: onnx.HardmaxOp, e: TirEmitter):
    """1 where the first maximum along `axis` is, 0 elsewhere: the argmax
    compared with each position's index along the axis."""
    shape = static_shape(op.input, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    where = e.value(tir.ArgmaxOp(op.input, axis, True))
    positions = np.arange(shape[axis], dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    hit = e.binary(BinaryFn.EQ, where, e.value(tir.ConstantOp(array_to_attr(positions))))
    return [e.value(tir.CastOp(hit, dtypes.tensor(op.input.type).element_type))]


@lowers(onnx.ShapeOp, onnx.SizeOp)
def _shape(op: onnx.ShapeOp | onnx.SizeOp, e: TirEmitter):
    raise e.error("the input has no static shape; Forge needs static shapes")
