"""Lowerings of ONNX's data-movement ops to `tir`: reshapes, transposes,
concatenation, split, slice, expand, pad, reductions (gathers, scatters
and OneHot are in `gather_scatter.py`)."""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from xdsl.dialects.builtin import AnyFloat, FloatAttr, IntegerAttr, IntegerType, Signedness

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.dialects.tir_shapes import broadcast, split_sections
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


@lowers(onnx.ReshapeOp)
def _reshape(op: onnx.ReshapeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    target = e.constant_ints(op.shape, "shape")
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
    return [e.reshape(op.data, out)]


@lowers(onnx.FlattenOp)
def _flatten(op: onnx.FlattenOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    axis = op.axis.value.data
    axis = axis + len(shape) if axis < 0 else axis
    return [e.reshape(op.input, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


@lowers(onnx.SqueezeOp)
def _squeeze(op: onnx.SqueezeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    if op.axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [normalize_axis(a, len(shape), e) for a in e.constant_ints(op.axes, "axes")]
    for a in axes:
        if shape[a] != 1:
            raise e.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [e.reshape(op.data, [d for i, d in enumerate(shape) if i not in axes])]


@lowers(onnx.UnsqueezeOp)
def _unsqueeze(op: onnx.UnsqueezeOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    axes = e.constant_ints(op.axes, "axes")
    rank = len(shape) + len(axes)
    axes = sorted(normalize_axis(a, rank, e) for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return [e.reshape(op.data, out)]


@lowers(onnx.TransposeOp)
def _transpose(op: onnx.TransposeOp, e: TirEmitter):
    rank = len(static_shape(op.data, e))
    perm = list(op.perm.get_values()) if op.perm is not None else list(reversed(range(rank)))
    if perm == list(range(rank)):
        return [op.data]
    return [e.transpose(op.data, perm)]


@lowers(onnx.ConcatOp)
def _concat(op: onnx.ConcatOp, e: TirEmitter):
    shapes = [static_shape(v, e) for v in op.inputs]
    axis = normalize_axis(op.axis.value.data, len(shapes[0]), e)
    inputs = [v for v, s in zip(op.inputs, shapes) if s[axis] != 0]
    if len(inputs) == 1:
        return [inputs[0]]
    return [e.concat(inputs, axis)]


@lowers(onnx.SplitOp)
def _split(op: onnx.SplitOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    dim = shape[axis]
    count = len(op.outputs)
    try:
        if op.split is not None:
            sections = e.constant_ints(op.split, "split")
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
    starts = e.constant_ints(op.starts, "starts")
    ends = e.constant_ints(op.ends, "ends")
    axes = e.constant_ints(op.axes, "axes") if op.axes is not None else list(range(len(starts)))
    steps = e.constant_ints(op.steps, "steps") if op.steps is not None else [1] * len(starts)
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
    return [e.slice(op.data, sl_axes, begins, stops, strides)]


def _reverse_slice(e, data, shape, axes, starts, ends, steps):
    """A slice with a negative step: the positions it takes along each axis
    are known, so it is a gather of constant indices per axis."""
    x = data
    for a, b, en, s in zip(axes, starts, ends, steps):
        a = a % len(shape)
        idx = np.arange(shape[a])[slice(b, en, s)]
        if list(idx) == list(range(shape[a])):
            continue
        x = e.gather(x, e.constant(idx.astype(np.int64)), a)
    return x


@lowers(onnx.TileOp)
def _tile(op: onnx.TileOp, e: TirEmitter):
    static_shape(op.input, e)
    return [e.value(tir.TileOp(op.input, e.constant_ints(op.repeats, "repeats")))]


@lowers(onnx.DepthToSpaceOp)
def _depth_to_space(op: onnx.DepthToSpaceOp, e: TirEmitter):
    n, c, h, w = static_shape(op.input, e)
    b = op.blocksize.value.data
    if op.mode.data == "DCR":
        x = e.reshape(op.input, [n, b, b, c // (b * b), h, w])
        perm = [0, 3, 4, 1, 5, 2]
    else:  # CRD
        x = e.reshape(op.input, [n, c // (b * b), b, b, h, w])
        perm = [0, 1, 4, 2, 5, 3]
    x = e.transpose(x, perm)
    return [e.reshape(x, [n, c // (b * b), h * b, w * b])]


@lowers(onnx.SpaceToDepthOp)
def _space_to_depth(op: onnx.SpaceToDepthOp, e: TirEmitter):
    n, c, h, w = static_shape(op.input, e)
    b = op.blocksize.value.data
    x = e.reshape(op.input, [n, c, h // b, b, w // b, b])
    perm = [0, 1, 3, 5, 2, 4] if op.mode.data == "CRD" else [0, 3, 5, 1, 2, 4]
    x = e.transpose(x, perm)
    return [e.reshape(x, [n, c * b * b, h // b, w // b])]


@lowers(onnx.CumSumOp)
def _cumsum(op: onnx.CumSumOp, e: TirEmitter):
    shape = static_shape(op.x, e)
    axis = normalize_axis(e.constant_ints(op.axis, "axis")[0], len(shape), e)
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
    target = broadcast(shape, e.constant_ints(op.shape, "shape"))
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
    pads = e.constant_ints(op.pads, "pads")
    axes = (
        [normalize_axis(a, rank, e) for a in e.constant_ints(op.axes, "axes")]
        if op.axes is not None
        else list(range(rank))
    )
    value = 0.0
    if op.constant_value is not None:
        array = e.required_constant(op.constant_value, "constant_value")
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
        x = e.gather(x, e.constant(positions.astype(np.int64)), axis)
    return x


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
    position = e.constant(positions)
    element = dtypes.tensor(op.X.type).element_type
    lowest = e.value(tir.FullOp(_lowest(element), dtypes.tensor_type(element, [])))
    values, indices = [], []
    for round_ in range(k):
        where = e.value(tir.ArgmaxOp(x, axis, True))
        best = e.reduce(ReduceFn.MAX, x, [axis], True)
        values.append(best if largest else e.unary(UnaryFn.NEG, best))
        indices.append(where)
        if round_ < k - 1:
            x = e.where(e.binary(BinaryFn.EQ, position, where), lowest, x)
    if k == 1:
        return [values[0], indices[0]]
    return [e.concat(values, axis), e.concat(indices, axis)]


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
    hit = e.binary(BinaryFn.EQ, where, e.constant(positions))
    return [e.value(tir.CastOp(hit, dtypes.tensor(op.input.type).element_type))]


@lowers(onnx.ShapeOp, onnx.SizeOp)
def _shape(op: onnx.ShapeOp | onnx.SizeOp, e: TirEmitter):
    raise e.error("the input has no static shape; Forge needs static shapes")
