"""Lowerings of ONNX's data-movement ops to `tir`: reshapes, transposes,
concatenation, split, slice, gather, expand, pad, reductions."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, TensorType, f32, i64

from forge_opt.dialects import tir
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import Emitter, as_ints, normalize_axis, static_shape
from forge_opt.transforms.onnx_to_tir_nn import _ints, reduce

LOWERINGS: dict = {}


def lowers(*op_types: str):
    def register(fn):
        for t in op_types:
            LOWERINGS[t] = fn
        return fn

    return register


def constant_ints(e: Emitter, value, what: str) -> list[int]:
    array = constant_array(value)
    if array is None:
        raise e.error(f"the '{what}' input must be a compile-time constant")
    return as_ints(array)


def reshape(e: Emitter, x, shape: list[int]):
    if static_shape(x, e) == list(shape):
        return x
    return e.value(tir.ReshapeOp(x, shape))


@lowers("Reshape")
def _reshape(op, e):
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


@lowers("Flatten")
def _flatten(op, e):
    shape = static_shape(op.input, e)
    axis = op.axis.value.data
    axis = axis + len(shape) if axis < 0 else axis
    return [reshape(e, op.input, [math.prod(shape[:axis]), math.prod(shape[axis:])])]


@lowers("Squeeze")
def _squeeze(op, e):
    shape = static_shape(op.data, e)
    if op.axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [normalize_axis(a, len(shape), e) for a in constant_ints(e, op.axes, "axes")]
    for a in axes:
        if shape[a] != 1:
            raise e.error(f"cannot squeeze axis {a} of size {shape[a]}")
    return [reshape(e, op.data, [d for i, d in enumerate(shape) if i not in axes])]


@lowers("Unsqueeze")
def _unsqueeze(op, e):
    shape = static_shape(op.data, e)
    axes = constant_ints(e, op.axes, "axes")
    rank = len(shape) + len(axes)
    axes = sorted(normalize_axis(a, rank, e) for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return [reshape(e, op.data, out)]


@lowers("Transpose")
def _transpose(op, e):
    rank = len(static_shape(op.data, e))
    perm = list(op.perm.get_values()) if op.perm is not None else list(reversed(range(rank)))
    if perm == list(range(rank)):
        return [op.data]
    return [e.value(tir.TransposeOp(op.data, perm))]


@lowers("Concat")
def _concat(op, e):
    shapes = [static_shape(v, e) for v in op.inputs]
    axis = normalize_axis(op.axis.value.data, len(shapes[0]), e)
    inputs = [v for v, s in zip(op.inputs, shapes) if s[axis] != 0]
    if len(inputs) == 1:
        return [inputs[0]]
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [
        e.value(
            tir.ConcatOp.build(
                operands=[inputs],
                result_types=[TensorType(op.inputs[0].type.element_type, out)],
                properties={"axis": IntegerAttr(axis, i64)},
            )
        )
    ]


@lowers("Split")
def _split(op, e):
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
            sections = tir.split_sections(dim, size=-(-dim // parts))
            if len(sections) != parts:
                raise e.error(f"dimension {axis} of size {dim} cannot be split into {parts} parts")
        else:
            sections = tir.split_sections(dim, parts=count)
    except ValueError as err:
        raise e.error(str(err)) from None
    return list(e.add(tir.SplitOp(op.input, axis, sections)).results)


@lowers("Slice")
def _slice(op, e):
    shape = static_shape(op.data, e)
    starts = constant_ints(e, op.starts, "starts")
    ends = constant_ints(e, op.ends, "ends")
    axes = constant_ints(e, op.axes, "axes") if op.axes is not None else list(range(len(starts)))
    steps = constant_ints(e, op.steps, "steps") if op.steps is not None else [1] * len(starts)
    sl_axes, begins, stops, strides = [], [], [], []
    for a, b, en, s in zip(axes, starts, ends, steps):
        a = normalize_axis(a, len(shape), e)
        if s <= 0:
            raise e.error(f"step {s} is not supported (only positive steps)")
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


@lowers("Gather")
def _gather(op, e):
    shape = static_shape(op.data, e)
    idx_shape = static_shape(op.indices, e, "indices")
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    indices = constant_array(op.indices)
    out = shape[:axis] + idx_shape + shape[axis + 1 :]
    if indices is not None:
        flat = [i % shape[axis] for i in as_ints(indices)]
        # contiguous constant indices are a slice (and a reshape)
        if flat and flat == list(range(flat[0], flat[0] + len(flat))):
            piece = e.value(tir.StridedSliceOp(op.data, [axis], [flat[0]], [flat[0] + len(flat)], [1]))
            return [reshape(e, piece, out)]
    gather = tir.GatherOp.build(
        operands=[op.data, op.indices],
        result_types=[TensorType(op.data.type.element_type, out)],
        properties={"axis": IntegerAttr(axis, i64)},
    )
    return [e.value(gather)]


@lowers("Expand")
def _expand(op, e):
    shape = static_shape(op.input, e)
    target = tir.broadcast_shapes(shape, constant_ints(e, op.shape, "shape"))
    if target == shape:
        return [op.input]
    return [
        e.value(tir.BroadcastOp.build(operands=[op.input], result_types=[TensorType(op.input.type.element_type, target)]))
    ]


@lowers("Pad")
def _pad(op, e):
    if op.mode.data != "constant":
        raise e.error(f"mode '{op.mode.data}' is not supported (only constant)")
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
        array = constant_array(op.constant_value)
        if array is None:
            raise e.error("the 'constant_value' input must be a compile-time constant")
        value = float(array.reshape(-1)[0]) if array.size else 0.0
    n = len(axes)
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[2 * a], full[2 * a + 1] = pads[i], pads[n + i]
    if any(p < 0 for p in full):
        raise e.error("negative pads are not supported")
    out = [d + full[2 * i] + full[2 * i + 1] for i, d in enumerate(shape)]
    return [
        e.value(
            tir.PadOp.build(
                operands=[op.data],
                result_types=[TensorType(op.data.type.element_type, out)],
                properties={"pads": _ints(full), "value": FloatAttr(value, f32)},
            )
        )
    ]


_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max"}


@lowers(*_REDUCE)
def _reduce(op, e):
    shape = static_shape(op.data, e)
    if op.axes is None:
        if op.noop_with_empty_axes.value.data:
            return [op.data]
        axes = list(range(len(shape)))
    else:
        axes = [normalize_axis(a, len(shape), e) for a in constant_ints(e, op.axes, "axes")]
        if not axes:
            axes = list(range(len(shape)))
    return [reduce(e, _REDUCE[op.ONNX_OP_TYPE], op.data, axes, bool(op.keepdims.value.data))]


@lowers("Shape", "Size")
def _shape(op, e):
    raise e.error("the input has no static shape; Forge needs static shapes")

