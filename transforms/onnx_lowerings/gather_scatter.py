"""Lowerings of ONNX's indexing ops to `tir`: Gather, GatherElements,
GatherND, the scatters and OneHot. Constant indices become flat positions
folded at compile time; indices computed at run time become flat positions
computed by `tir` arithmetic (an index times its axis' stride plus the
position of its row), read by one gather of the flattened data."""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, as_ints, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


@lowers(onnx.GatherOp)
def _gather(op: onnx.GatherOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    idx_shape = static_shape(op.indices, e, "indices")
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    indices = constant_array(op.indices)
    out = shape[:axis] + idx_shape + shape[axis + 1 :]
    if indices is not None:
        flat = [i % shape[axis] for i in as_ints(indices)]
        # contiguous constant indices are a slice (and a reshape)
        if flat and flat == list(range(flat[0], flat[0] + len(flat))):
            piece = e.slice(op.data, [axis], [flat[0]], [flat[0] + len(flat)], [1])
            return [e.reshape(piece, out)]
    return [e.gather(op.data, op.indices, axis)]


def _take_flat(e: TirEmitter, data, flat_indices: np.ndarray, out_shape: list[int]):
    """Elements of `data` at constant positions of its flattened form."""
    shape = static_shape(data, e)
    flat = e.reshape(data, [math.prod(shape)])
    idx = e.constant(flat_indices.reshape(-1).astype(np.int64))
    taken = e.gather(flat, idx, 0)
    return e.reshape(taken, out_shape)


def _element_positions(op, e) -> np.ndarray:
    """Flat positions in `data` addressed by the constant `indices` along
    `axis` (GatherElements / ScatterElements), shaped like the indices."""
    shape = static_shape(op.data, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    indices = e.required_constant(op.indices, "indices")
    indices = np.where(indices < 0, indices + shape[axis], indices)
    grid = [np.asarray(g) for g in np.indices(indices.shape)]
    grid[axis] = indices
    return np.asarray(np.ravel_multi_index(tuple(grid), shape))


def _index_arithmetic(e: TirEmitter, indices: SSAValue):
    """A constant maker of the run-time indices' integer type."""
    dtype = dtypes.numpy_dtype(dtypes.tensor(indices.type).element_type)

    def const(values) -> SSAValue:
        return e.constant(np.asarray(values, dtype))

    return const


def _counted_back(e: TirEmitter, const, idx: SSAValue, size: int) -> SSAValue:
    """Run-time indices with negative ones counted back from `size`."""
    negative = e.binary(BinaryFn.LT, idx, const(0))
    return e.where(negative, e.binary(BinaryFn.ADD, idx, const(size)), idx)


def _scaled(e: TirEmitter, const, idx: SSAValue, stride: int) -> SSAValue:
    return idx if stride == 1 else e.binary(BinaryFn.MUL, idx, const(stride))


def _take_rows(e: TirEmitter, table: SSAValue, rows: SSAValue, out_shape: list[int]) -> SSAValue:
    """Rows of a table at positions computed at run time, in `out_shape`."""
    count = math.prod(static_shape(rows, e))
    taken = e.gather(table, e.reshape(rows, [count]), 0)
    return e.reshape(taken, out_shape)


@lowers(onnx.GatherElementsOp)
def _gather_elements(op: onnx.GatherElementsOp, e: TirEmitter):
    if constant_array(op.indices) is not None:
        positions = _element_positions(op, e)
        return [_take_flat(e, op.data, positions, list(positions.shape))]
    # computed indices (a tree ensemble compiled to tensors): flat position = index * stride + its row's position
    shape = static_shape(op.data, e)
    ishape = static_shape(op.indices, e, "indices")
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    const = _index_arithmetic(e, op.indices)
    idx = _counted_back(e, const, op.indices, shape[axis])
    grid = [np.asarray(g) for g in np.indices(ishape)]
    grid[axis] = np.zeros(ishape, np.int64)
    base = np.ravel_multi_index(tuple(grid), shape)
    positions = e.binary(BinaryFn.ADD, _scaled(e, const, idx, math.prod(shape[axis + 1 :])), const(base))
    return [_take_rows(e, e.reshape(op.data, [math.prod(shape)]), positions, ishape)]


@lowers(onnx.GatherNDOp)
def _gather_nd(op: onnx.GatherNDOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    b = op.batch_dims.value.data
    if constant_array(op.indices) is None:
        return [_gather_nd_at_run_time(op, e, shape, b)]
    indices = e.required_constant(op.indices, "indices")
    depth = indices.shape[-1]
    positions = np.arange(math.prod(shape)).reshape(shape)
    picked = np.asarray(
        [
            positions[tuple(batch) + tuple(int(i) for i in idx)]
            for batch in np.ndindex(*shape[:b])
            for idx in indices[batch].reshape(-1, depth)
        ]
    )
    out = list(indices.shape[:-1]) + shape[b + depth :]
    return [_take_flat(e, op.data, picked, out)]


def _gather_nd_at_run_time(op: onnx.GatherNDOp, e: TirEmitter, shape: list[int], b: int) -> SSAValue:
    """GatherND of computed indices: the data as rows of the slices the
    indices address, [batch x addressed, slice], and one row per index
    tuple: its batch's first row plus each index times its dim's stride."""
    ishape = static_shape(op.indices, e, "indices")
    depth, lead = ishape[-1], ishape[:-1]
    addressed, slab = math.prod(shape[b : b + depth]), math.prod(shape[b + depth :])
    const = _index_arithmetic(e, op.indices)
    rows = const(np.ravel_multi_index(tuple(np.indices(lead)[:b]), shape[:b]) * addressed) if b else None
    for k in range(depth):
        part = e.slice(op.indices, [len(ishape) - 1], [k], [k + 1], [1])
        idx = _counted_back(e, const, e.reshape(part, lead), shape[b + k])
        term = _scaled(e, const, idx, math.prod(shape[b + k + 1 : b + depth]))
        rows = term if rows is None else e.binary(BinaryFn.ADD, rows, term)
    assert rows is not None  # ONNX: the last dim of GatherND's indices is at least 1
    table = e.reshape(op.data, [math.prod(shape[:b]) * addressed, slab])
    return _take_rows(e, table, rows, [*lead, *shape[b + depth :]])


_SCATTER_LIMIT = 1 << 22


def _scatter(e: TirEmitter, data, updates, positions: np.ndarray, reduction: str):
    """`data` with `updates[j]` written at flat position `positions[j]`
    (`reduction` none: the last write wins; add: writes add up)."""
    shape = static_shape(data, e)
    size, count = math.prod(shape), positions.size
    flat = positions.reshape(-1)
    if count == size and reduction in ("none", "add") and np.array_equal(np.sort(flat), np.arange(size)):
        # every position written once (an expert's rows at a fixed size, `dispatch`): the updates, reordered
        if np.array_equal(flat, np.arange(size)):
            written = e.reshape(updates, shape)
        else:
            order = e.constant(np.argsort(flat).astype(np.int64))
            written = e.reshape(e.gather(e.reshape(updates, [count]), order, 0), shape)
        zeros = constant_array(data)
        if reduction == "none" or (zeros is not None and not np.any(zeros)):
            return written
        return e.binary(BinaryFn.ADD, data, written)
    if size * count > _SCATTER_LIMIT:
        raise e.error(f"a scatter of {count} updates into {size} elements is too large to route")
    dtype = dtypes.numpy_dtype(data.type.element_type)
    route = np.zeros((size, count), dtype)
    if reduction == "none":
        for j, p in enumerate(positions.reshape(-1)):
            route[p, :] = 0
            route[p, j] = 1
    elif reduction == "add":
        for j, p in enumerate(positions.reshape(-1)):
            route[p, j] += 1
    elif reduction in ("mul", "max", "min") and count <= _SEQUENTIAL_LIMIT:
        return _scatter_sequential(e, data, updates, positions, reduction)
    else:
        raise e.error(f"reduction '{reduction}' of {count} updates is not supported")
    column = e.reshape(updates, [count, 1])
    routed = e.value(tir.MatmulOp(e.constant(route), column))
    routed = e.reshape(routed, shape)
    if reduction == "add":
        return e.binary(BinaryFn.ADD, data, routed)
    written = np.zeros(size, bool)
    written[positions.reshape(-1)] = True
    mask = e.constant(written.reshape(shape))
    return e.where(mask, routed, data)


_SEQUENTIAL_LIMIT = 64


def _scatter_sequential(e: TirEmitter, data, updates, positions: np.ndarray, reduction: str):
    """Fold the updates in one at a time: out = where(at p_j, out (op) u_j, out)."""
    shape = static_shape(data, e)
    size = math.prod(shape)
    fn = BinaryFn(reduction)
    out = e.reshape(data, [size])
    flat_updates = e.reshape(updates, [positions.size])
    for j, p in enumerate(positions.reshape(-1)):
        u = e.slice(flat_updates, [0], [j], [j + 1], [1])
        at = np.zeros(size, bool)
        at[p] = True
        mask = e.constant(at)
        out = e.where(mask, e.binary(fn, out, u), out)
    return e.reshape(out, shape)


@lowers(onnx.ScatterElementsOp, onnx.ScatterOp)
def _scatter_elements(op: onnx.ScatterElementsOp | onnx.ScatterOp, e: TirEmitter):
    positions = _element_positions(op, e)
    reduction = op.reduction.data if isinstance(op, onnx.ScatterElementsOp) else "none"  # Scatter has none
    return [_scatter(e, op.data, op.updates, positions, reduction)]


@lowers(onnx.ScatterNDOp)
def _scatter_nd(op: onnx.ScatterNDOp, e: TirEmitter):
    shape = static_shape(op.data, e)
    indices = e.required_constant(op.indices, "indices")
    depth = indices.shape[-1]
    slab = math.prod(shape[depth:])
    positions = np.asarray(
        [
            np.ravel_multi_index(tuple(int(i) % shape[k] for k, i in enumerate(idx)), shape[:depth]) * slab + t
            for idx in indices.reshape(-1, depth)
            for t in range(slab)
        ]
    )
    return [_scatter(e, op.data, op.updates, positions, op.reduction.data)]


@lowers(onnx.OneHotOp)
def _one_hot(op: onnx.OneHotOp, e: TirEmitter):
    """on where an index (negative ones counting back from depth) equals the
    position along the new axis, off elsewhere: folded when the indices are
    constants, compared at run time when not."""
    depth = constant_array(op.depth)
    if depth is None:
        raise e.error("the 'depth' input must be a compile-time constant")
    depth = int(np.asarray(depth).reshape(-1)[0])
    shape = static_shape(op.indices, e, "indices")
    rank = len(shape) + 1
    axis = normalize_axis(op.axis.value.data, rank, e)
    along = [-1 if i == axis else 1 for i in range(rank)]
    indices = constant_array(op.indices)
    if indices is not None:
        idx = np.where(indices < 0, indices + depth, indices)
        hot = np.expand_dims(idx, axis) == np.arange(depth).reshape(along)
        mask = e.constant(hot)
    else:
        const = _index_arithmetic(e, op.indices)
        x = e.reshape(_counted_back(e, const, op.indices, depth), [*shape[:axis], 1, *shape[axis:]])
        mask = e.binary(BinaryFn.EQ, x, const(np.arange(depth).reshape(along)))
    off = e.slice(op.values, [0], [0], [1], [1])
    on = e.slice(op.values, [0], [1], [2], [1])
    return [e.where(mask, on, off)]
