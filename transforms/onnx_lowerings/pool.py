"""Lowerings of ONNX's pooling ops to `tir`: MaxPool, AveragePool, LpPool,
the global pools; 1-d pools as 2-d, windows Forge cannot pool made explicit."""

from __future__ import annotations

import itertools
import math

import numpy as np

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, PoolKind, ReduceFn, UnaryFn
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.onnx_lowerings.windows import fold_spatial_pad, spatial, window
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _pool(op, e, kind, source=None, include=None):
    """The pool of `op`'s window over `source` (default: its input);
    `include`: whether padding counts in an average (default: the op's)."""
    source = op.X if source is None else source
    x_shape = static_shape(source, e)
    kernel = list(op.kernel_shape.get_values())
    strides, dilations, pads = spatial(op, e, x_shape, kernel, op.ONNX_OP_TYPE)
    ceil_mode = op.ceil_mode.value.data
    if include is None:
        include = bool(op.count_include_pad.value.data) if isinstance(op, onnx.AveragePoolOp) else False
    x = source
    # A pad of the pool's identity folds in: -inf for max; zeros for an
    # average that counts padding (or has none of its own, then counts it).
    # Not with ceil_mode, whose last window may not start in the padding.
    if not ceil_mode and (kind == PoolKind.MAX or include or not any(pads)):
        x, pads = fold_spatial_pad(x, pads, -math.inf if kind == PoolKind.MAX else 0.0)
        if x is not source:
            include = True
            x_shape = static_shape(x, e)
    return tir.Pool2dOp(kind, x, kernel, strides, pads, dilations, bool(ceil_mode), bool(include))


def _pool1d(op, e, kind):
    """A 1-D pooling as a 2-D one over a height of 1."""
    n, c, w = static_shape(op.X, e)
    x = e.reshape(op.X, [n, c, 1, w])
    k = list(op.kernel_shape.get_values())[0]
    s = list(op.strides.get_values())[0] if op.strides is not None else 1
    d = list(op.dilations.get_values())[0] if op.dilations is not None else 1
    if op.auto_pad.data != "NOTSET":
        raise e.error(f"auto_pad {op.auto_pad.data} is not supported for 1-D pooling")
    lo, hi = list(op.pads.get_values()) if op.pads is not None else (0, 0)
    ceil_mode = op.ceil_mode.value.data
    include = op.count_include_pad if isinstance(op, onnx.AveragePoolOp) else None
    pool = e.value(
        tir.Pool2dOp(
            kind, x, [1, k], [1, s], [0, lo, 0, hi], [1, d], bool(ceil_mode),
            bool(include.value.data) if include is not None else False,
        )
    )
    return e.reshape(pool, [n, c, static_shape(pool, e)[3]])


def _needs_windows(op, e) -> bool:
    """Pooling Forge's Pool2d cannot do (dilated, or not 1-D or 2-D): as windows."""
    rank = len(static_shape(op.X, e))
    dilated = op.dilations is not None and any(d != 1 for d in op.dilations.get_values())
    return dilated or rank not in (3, 4)


def _window_pool(op, e: TirEmitter, kind: str):
    """Pooling of any rank and dilation as the max or sum of one strided
    slice of the padded input per kernel position (K slices for a kernel of
    K positions). An average divides by a compile-time count per output
    position, of the positions inside the input (or, with
    count_include_pad, inside its padding too; never the overhang a ceil
    mode window reaches past the padding)."""
    x = op.X
    shape = static_shape(x, e)
    out = static_shape(op.results[0], e, "result")[2:]
    r = len(shape) - 2
    kernel = list(op.kernel_shape.get_values())
    strides, dilations, begin, end = window(op, shape, kernel)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    # what the last window reaches past the padding (ceil mode)
    over = [
        max(0, (o - 1) * s + span - (n + b + f))
        for o, s, span, n, b, f in zip(out, strides, extents, shape[2:], begin, end)
    ]
    if kind == "lp":
        p = op.p.value.data
        x = e.binary(BinaryFn.POW, e.unary(UnaryFn.ABS, x), e.scalar(p, x))
    fill = -math.inf if kind == "max" else 0.0
    if any(begin) or any(end) or any(over):
        pad_list = [0, 0, 0, 0]
        for b, f, o in zip(begin, end, over):
            pad_list += [b, f + o]
        x = e.value(tir.PadOp(x, pad_list, fill))
    total = None
    for offsets in itertools.product(*(range(k) for k in kernel)):
        starts = [o * d for o, d in zip(offsets, dilations)]
        stops = [st + (o - 1) * s + 1 for st, o, s in zip(starts, out, strides)]
        piece = e.slice(x, list(range(2, 2 + r)), starts, stops, strides)
        if total is None:
            total = piece
        else:
            total = e.binary(BinaryFn.MAX if kind == "max" else BinaryFn.ADD, total, piece)
    assert total is not None
    if kind == "lp":
        return e.binary(BinaryFn.POW, total, e.scalar(1 / op.p.value.data, total))
    if kind == "avg":
        include = bool(op.count_include_pad.value.data)
        counts = np.ones([1, 1], np.float32)
        for n, k, s, d, b, f, o in zip(shape[2:], kernel, strides, dilations, begin, end, out):
            lo, hi = (-b, n + f) if include else (0, n)
            starts = np.arange(o) * s - b
            positions = starts[:, None] + np.arange(k)[None, :] * d
            count = ((positions >= lo) & (positions < hi)).sum(axis=1).astype(np.float32)
            counts = counts[..., None] * count
        inverse = e.constant((1.0 / counts).astype(dtypes.numpy_dtype(dtypes.tensor(total.type).element_type)))
        return e.binary(BinaryFn.MUL, total, inverse)
    return total


@lowers(onnx.MaxPoolOp)
def _max_pool(op: onnx.MaxPoolOp, e: TirEmitter):
    if _needs_windows(op, e):
        if op.Indices is not None and op.Indices.uses:
            raise e.error("the Indices output is not supported")
        return [_window_pool(op, e, "max")] + ([None] if op.Indices is not None else [])
    if len(static_shape(op.X, e)) == 3:
        if op.Indices is not None and op.Indices.uses:
            raise e.error("the Indices output is not supported")
        return [_pool1d(op, e, PoolKind.MAX)] + ([None] if op.Indices is not None else [])
    if op.storage_order.value.data:
        raise e.error("storage_order=1 is not supported")
    return [e.value(_pool(op, e, PoolKind.MAX))] + ([None] if op.Indices is not None else [])


@lowers(onnx.AveragePoolOp)
def _avg_pool(op: onnx.AveragePoolOp, e: TirEmitter):
    if _needs_windows(op, e):
        return [_window_pool(op, e, "avg")]
    if len(static_shape(op.X, e)) == 3:
        return [_pool1d(op, e, PoolKind.AVG)]
    return [e.value(_pool(op, e, PoolKind.AVG))]


@lowers(onnx.LpPoolOp)
def _lp_pool(op: onnx.LpPoolOp, e: TirEmitter):
    """(sum over the window of |x|^p)^(1/p): an average pool that counts the
    zero padding, times the window's size."""
    if _needs_windows(op, e) or len(static_shape(op.X, e)) != 4:
        return [_window_pool(op, e, "lp")]
    p = op.p.value.data
    powered = e.binary(BinaryFn.POW, e.unary(UnaryFn.ABS, op.X), e.scalar(p, op.X))
    pooled = e.value(_pool(op, e, PoolKind.AVG, powered, include=True))
    kh, kw = op.kernel_shape.get_values()
    total = e.binary(BinaryFn.MUL, pooled, e.scalar(kh * kw, pooled))
    return [e.binary(BinaryFn.POW, total, e.scalar(1 / p, total))]


@lowers(onnx.GlobalAveragePoolOp, onnx.GlobalMaxPoolOp)
def _global_pool(op: onnx.GlobalAveragePoolOp | onnx.GlobalMaxPoolOp, e: TirEmitter):
    shape = static_shape(op.X, e)
    average = isinstance(op, onnx.GlobalAveragePoolOp)
    if len(shape) == 4:  # one pool with the whole image as its window, as Forge's own path makes it
        kind = PoolKind.AVG if average else PoolKind.MAX
        return [e.value(tir.Pool2dOp(kind, op.X, shape[2:], [1, 1], [0, 0, 0, 0], [1, 1], False, True))]
    return [e.reduce(ReduceFn.MEAN if average else ReduceFn.MAX, op.X, list(range(2, len(shape))), True)]
