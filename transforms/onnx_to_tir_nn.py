"""Lowerings of ONNX's neural-network ops to `tir`: MatMul, Gemm, Conv,
pooling, normalisations, Softmax, LRN."""

from __future__ import annotations

import itertools
import math

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, PoolKind, ReduceFn, UnaryFn
from forge_opt.transforms.lowering import Emitter, LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.onnx_to_tir_elementwise import binary, constant, scalar, unary

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _ints(values) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def matmul(e: Emitter, a, b):
    sa, sb = static_shape(a, e), static_shape(b, e)
    if len(sa) == 1 or len(sb) == 1:
        # numpy's rule: a 1-D operand is a row (or column) that is dropped after.
        a2 = e.value(tir.ReshapeOp(a, [1, sa[0]])) if len(sa) == 1 else a
        b2 = e.value(tir.ReshapeOp(b, [sb[0], 1])) if len(sb) == 1 else b
        y = matmul(e, a2, b2)
        out = static_shape(y, e)
        out = out[:-2] + ([] if len(sa) == 1 else [out[-2]]) + ([] if len(sb) == 1 else [out[-1]])
        return e.value(tir.ReshapeOp(y, out))
    return e.value(tir.MatmulOp(a, b))


@lowers(onnx.MatMulOp)
def _matmul(op: onnx.MatMulOp, e: Emitter):
    return [matmul(e, op.A, op.B)]


def transpose_2d(e: Emitter, x):
    rank = len(static_shape(x, e))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return e.value(tir.TransposeOp(x, perm))


@lowers(onnx.GemmOp)
def _gemm(op: onnx.GemmOp, e: Emitter):
    """alpha * A' B' + beta * C -> transposes, matmul, scaling, add."""
    a, b = op.A, op.B
    if op.transA.value.data:
        a = transpose_2d(e, a)
    if op.transB.value.data:
        b = transpose_2d(e, b)
    y = matmul(e, a, b)
    alpha, beta = op.alpha.value.data, op.beta.value.data
    if alpha != 1.0:
        y = binary(e, BinaryFn.MUL, y, scalar(e, alpha, y))
    if op.C is not None and beta != 0.0:
        c = op.C
        if beta != 1.0:
            c = binary(e, BinaryFn.MUL, c, scalar(e, beta, c))
        y = binary(e, BinaryFn.ADD, y, c)
    return [y]


def _spatial(op, e, x_shape, kernel, name):
    """Strides, dilations and [top, left, bottom, right] pads of a 2-D window
    op, with auto_pad resolved."""
    if len(x_shape) != 4:
        raise e.error(f"only 2-D {name} (4-D input) is supported, the input has rank {len(x_shape)}")
    strides = list(op.strides.get_values()) if op.strides is not None else [1, 1]
    dilations = list(op.dilations.get_values()) if op.dilations is not None else [1, 1]
    auto_pad = op.auto_pad.data
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads_begin, pads_end = [], []
        for size, k, s, d in zip(x_shape[2:], kernel, strides, dilations):
            out = math.ceil(size / s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
            pads_begin.append(begin)
            pads_end.append(end)
        pads = [pads_begin[0], pads_begin[1], pads_end[0], pads_end[1]]
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = list(op.pads.get_values()) if op.pads is not None else [0, 0, 0, 0]
        # ONNX: [x1_begin, x2_begin, x1_end, x2_end] = [top, left, bottom, right]
    return strides, dilations, pads


def fold_spatial_pad(x, pads: list[int], identity: float):
    """(input, pads) with a constant `tir.pad` of `identity` on the two
    spatial dims of `x` folded into the op's [top, left, bottom, right]
    pads: exporters write TF-style padding as a Pad before Conv or pooling,
    and Forge pads inside the op for free. The Pad goes if nothing else uses it."""
    while isinstance(pad := x.owner, tir.PadOp) and pad.value.value.data == identity:
        p = list(pad.pads.get_values())
        if len(p) != 8 or any(p[:4]):
            break
        top, bottom, left, right = p[4:]
        x, pads = pad.input, [pads[0] + top, pads[1] + left, pads[2] + bottom, pads[3] + right]
    return x, pads


@lowers(onnx.ConvOp)
def _conv(op: onnx.ConvOp, e: Emitter):
    x_shape, w_shape = static_shape(op.X, e), static_shape(op.W, e, "weight")
    if len(x_shape) == 3:
        return [_conv1d(op, e, x_shape, w_shape)]
    kernel = w_shape[2:]
    strides, dilations, pads = _spatial(op, e, x_shape, kernel, "Conv")
    x, pads = fold_spatial_pad(op.X, pads, 0.0)
    x_shape = static_shape(x, e)
    return [e.value(tir.Conv2dOp(x, op.W, op.B, strides, pads, dilations, op.group.value.data))]


def _conv1d(op, e, x_shape, w_shape):
    """A 1-D convolution as a 2-D one over a height of 1."""
    x = e.value(tir.ReshapeOp(op.X, [x_shape[0], x_shape[1], 1, x_shape[2]]))
    w = e.value(tir.ReshapeOp(op.W, [w_shape[0], w_shape[1], 1, w_shape[2]]))
    strides = [1, *(op.strides.get_values() if op.strides is not None else [1])]
    dilations = [1, *(op.dilations.get_values() if op.dilations is not None else [1])]
    k, s, d = w_shape[2], strides[1], dilations[1]
    auto_pad = op.auto_pad.data
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = math.ceil(x_shape[2] / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - x_shape[2])
        lo, hi = (total // 2, total - total // 2) if auto_pad == "SAME_UPPER" else (total - total // 2, total // 2)
    elif auto_pad == "VALID" or op.pads is None:
        lo = hi = 0
    else:
        lo, hi = op.pads.get_values()
    y = e.value(tir.Conv2dOp(x, w, op.B, strides, [0, lo, 0, hi], dilations, op.group.value.data))
    return e.value(tir.ReshapeOp(y, [x_shape[0], w_shape[0], static_shape(y, e)[3]]))


#: Det expands along the first row; its n! terms are emitted up to this size.
_LARGEST_DET = 4


@lowers(onnx.DetOp)
def _det(op: onnx.DetOp, e: Emitter):
    """The determinant of each trailing square matrix by cofactor expansion
    (exact sums of products; sizes up to 4)."""
    shape = static_shape(op.X, e)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise e.error(f"the input {shape} does not end in square matrices")
    n, batch, rank = shape[-1], shape[:-2], len(shape)
    if n > _LARGEST_DET:
        raise e.error(f"determinants of {n}x{n} matrices are not supported (up to {_LARGEST_DET}x{_LARGEST_DET})")
    entries = [
        [
            e.value(tir.ReshapeOp(
                e.value(tir.StridedSliceOp(op.X, [rank - 2, rank - 1], [i, j], [i + 1, j + 1], [1, 1])), batch
            ))
            for j in range(n)
        ]
        for i in range(n)
    ]

    def det(rows: list[int], cols: list[int]) -> SSAValue:
        if len(rows) == 1:
            return entries[rows[0]][cols[0]]
        terms = [
            binary(e, BinaryFn.MUL, entries[rows[0]][c], det(rows[1:], cols[:k] + cols[k + 1 :]))
            for k, c in enumerate(cols)
        ]
        total = terms[0]
        for k, term in enumerate(terms[1:], 1):
            total = binary(e, BinaryFn.SUB if k % 2 else BinaryFn.ADD, total, term)
        return total

    return [det(list(range(n)), list(range(n)))]


@lowers(onnx.ConvTransposeOp)
def _conv_transpose(op: onnx.ConvTransposeOp, e: Emitter):
    """Forge's Conv2dTranspose (torch's conv_transpose2d, ONNX's weight
    layout). Its padding is symmetric: uneven ONNX pads cut the smaller
    amount there and the rest with a slice. 1-D runs over a height of 1."""
    x_shape, w_shape = static_shape(op.X, e), static_shape(op.W, e, "weight")
    out_shape = static_shape(op.Y, e, "result")
    rank = len(x_shape) - 2
    if rank not in (1, 2):
        raise e.error(f"{rank}-D transposed convolution is not supported (1-D and 2-D are)")

    def ints(attr, default: int) -> list[int]:
        return list(attr.get_values()) if attr is not None else [default] * rank

    strides, dilations, extra = ints(op.strides, 1), ints(op.dilations, 1), ints(op.output_padding, 0)
    kernel = list(op.kernel_shape.get_values()) if op.kernel_shape is not None else w_shape[2:]
    full = [(x_shape[2 + i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 + extra[i] for i in range(rank)]
    auto_pad = op.auto_pad.data
    if op.pads is not None and auto_pad == "NOTSET" and op.output_shape is None:
        pads = list(op.pads.get_values())
        begin, end = pads[:rank], pads[rank:]
    else:  # from the output size (auto_pad, output_shape): ONNX's split of the total
        total = [full[i] - out_shape[2 + i] for i in range(rank)]
        for i, t in enumerate(total):  # a larger output: rows past the full result, as output_padding adds
            if t < 0:
                if extra[i] - t >= max(strides[i], dilations[i]):
                    raise e.error(f"an output of {out_shape[2:]} is larger than the full result {full} allows")
                extra[i] -= t
                total[i] = 0
        upper = auto_pad == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    x, w = op.X, op.W
    if rank == 1:  # over a height of 1
        x = e.value(tir.ReshapeOp(x, [x_shape[0], x_shape[1], 1, x_shape[2]]))
        w = e.value(tir.ReshapeOp(w, [*w_shape[:2], 1, w_shape[2]]))
        strides, dilations, extra = [1, *strides], [1, *dilations], [0, *extra]
        begin, end = [0, *begin], [0, *end]
    symmetric = [min(b, t) for b, t in zip(begin, end)]
    y = e.value(tir.ConvTranspose2dOp(x, w, op.B, strides, symmetric, dilations, extra, op.group.value.data))
    shape = static_shape(y, e)
    cuts = [(2 + i, b - p, shape[2 + i] - (t - p)) for i, (b, t, p) in enumerate(zip(begin, end, symmetric)) if b != t]
    if cuts:
        axes, starts, stops = (list(c) for c in zip(*cuts))
        y = e.value(tir.StridedSliceOp(y, axes, starts, stops, [1] * len(cuts)))
    if rank == 1:
        y = e.value(tir.ReshapeOp(y, out_shape))
    return [y]


def _pool(op, e, kind, source=None, include=None):
    """The pool of `op`'s window over `source` (default: its input);
    `include`: whether padding counts in an average (default: the op's)."""
    source = op.X if source is None else source
    x_shape = static_shape(source, e)
    kernel = list(op.kernel_shape.get_values())
    strides, dilations, pads = _spatial(op, e, x_shape, kernel, op.ONNX_OP_TYPE)
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
    x = e.value(tir.ReshapeOp(op.X, [n, c, 1, w]))
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
    return e.value(tir.ReshapeOp(pool, [n, c, static_shape(pool, e)[3]]))


def _needs_windows(op, e) -> bool:
    """Pooling Forge's Pool2d cannot do (dilated, or not 1-D or 2-D): as windows."""
    rank = len(static_shape(op.X, e))
    dilated = op.dilations is not None and any(d != 1 for d in op.dilations.get_values())
    return dilated or rank not in (3, 4)


def _window_pool(op, e: Emitter, kind: str):
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
    strides = list(op.strides.get_values()) if op.strides is not None else [1] * r
    dilations = list(op.dilations.get_values()) if op.dilations is not None else [1] * r
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    auto_pad = op.auto_pad.data
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        totals = [max(0, (o - 1) * s + span - n) for o, s, span, n in zip(out, strides, extents, shape[2:])]
        small = [t // 2 for t in totals]
        large = [t - t // 2 for t in totals]
        begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
    elif auto_pad == "VALID" or op.pads is None:
        begin, end = [0] * r, [0] * r
    else:
        pads = list(op.pads.get_values())
        begin, end = pads[:r], pads[r:]
    # what the last window reaches past the padding (ceil mode)
    over = [
        max(0, (o - 1) * s + span - (n + b + f))
        for o, s, span, n, b, f in zip(out, strides, extents, shape[2:], begin, end)
    ]
    if kind == "lp":
        p = op.p.value.data
        x = binary(e, BinaryFn.POW, unary(e, UnaryFn.ABS, x), scalar(e, p, x))
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
        piece = e.value(tir.StridedSliceOp(x, list(range(2, 2 + r)), starts, stops, strides))
        if total is None:
            total = piece
        else:
            total = binary(e, BinaryFn.MAX if kind == "max" else BinaryFn.ADD, total, piece)
    assert total is not None
    if kind == "lp":
        return binary(e, BinaryFn.POW, total, scalar(e, 1 / op.p.value.data, total))
    if kind == "avg":
        include = bool(op.count_include_pad.value.data)
        counts = np.ones([1, 1], np.float32)
        for n, k, s, d, b, f, o in zip(shape[2:], kernel, strides, dilations, begin, end, out):
            lo, hi = (-b, n + f) if include else (0, n)
            starts = np.arange(o) * s - b
            positions = starts[:, None] + np.arange(k)[None, :] * d
            count = ((positions >= lo) & (positions < hi)).sum(axis=1).astype(np.float32)
            counts = counts[..., None] * count
        inverse = constant(e, (1.0 / counts).astype(dtypes.numpy_dtype(dtypes.tensor(total.type).element_type)))
        return binary(e, BinaryFn.MUL, total, inverse)
    return total


@lowers(onnx.MaxPoolOp)
def _max_pool(op: onnx.MaxPoolOp, e: Emitter):
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
def _avg_pool(op: onnx.AveragePoolOp, e: Emitter):
    if _needs_windows(op, e):
        return [_window_pool(op, e, "avg")]
    if len(static_shape(op.X, e)) == 3:
        return [_pool1d(op, e, PoolKind.AVG)]
    return [e.value(_pool(op, e, PoolKind.AVG))]


@lowers(onnx.LpPoolOp)
def _lp_pool(op: onnx.LpPoolOp, e: Emitter):
    """(sum over the window of |x|^p)^(1/p): an average pool that counts the
    zero padding, times the window's size."""
    if _needs_windows(op, e) or len(static_shape(op.X, e)) != 4:
        return [_window_pool(op, e, "lp")]
    p = op.p.value.data
    powered = binary(e, BinaryFn.POW, unary(e, UnaryFn.ABS, op.X), scalar(e, p, op.X))
    pooled = e.value(_pool(op, e, PoolKind.AVG, powered, include=True))
    kh, kw = op.kernel_shape.get_values()
    total = binary(e, BinaryFn.MUL, pooled, scalar(e, kh * kw, pooled))
    return [binary(e, BinaryFn.POW, total, scalar(e, 1 / p, total))]


def reduce(e: Emitter, fn: ReduceFn, x, axes, keepdims: bool):
    shape = static_shape(x, e)
    return e.value(tir.ReduceOp(fn, x, sorted({a % len(shape) for a in axes}), keepdims))


@lowers(onnx.GlobalAveragePoolOp, onnx.GlobalMaxPoolOp)
def _global_pool(op: onnx.GlobalAveragePoolOp | onnx.GlobalMaxPoolOp, e: Emitter):
    shape = static_shape(op.X, e)
    average = isinstance(op, onnx.GlobalAveragePoolOp)
    if len(shape) == 4:  # one pool with the whole image as its window, as Forge's own path makes it
        kind = PoolKind.AVG if average else PoolKind.MAX
        return [e.value(tir.Pool2dOp(kind, op.X, shape[2:], [1, 1], [0, 0, 0, 0], [1, 1], False, True))]
    return [reduce(e, ReduceFn.MEAN if average else ReduceFn.MAX, op.X, list(range(2, len(shape))), True)]


@lowers(onnx.BatchNormalizationOp)
def _batchnorm(op: onnx.BatchNormalizationOp, e: Emitter):
    if op.training_mode.value.data:
        raise e.error("training_mode=1 is not supported for inference")
    bn = tir.BatchnormOp(op.X, op.scale, op.B, op.input_mean, op.input_var, op.epsilon.value.data)
    return [e.value(bn), None, None][: len(op.results)]


@lowers(onnx.SoftmaxOp, onnx.LogSoftmaxOp)
def _softmax(op: onnx.SoftmaxOp | onnx.LogSoftmaxOp, e: Emitter):
    rank = len(static_shape(op.input, e))
    axis = normalize_axis(op.axis.value.data, rank, e)
    return [e.value(tir.SoftmaxOp(op.input, axis, log=isinstance(op, onnx.LogSoftmaxOp)))]


@lowers(onnx.LayerNormalizationOp)
def _layernorm(op: onnx.LayerNormalizationOp, e: Emitter):
    shape = static_shape(op.X, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    extra = [r for r in op.results[1:] if r is not None]
    eps = op.epsilon.value.data
    if axis == len(shape) - 1 and not any(r.uses for r in extra):
        bias = op.B if op.B is not None else e.value(tir.ConstantOp(_zeros(shape[-1:], op.X)))
        return [e.value(tir.LayernormOp(op.X, op.Scale, bias, eps))] + [None] * len(extra)
    # Normalising over several trailing axes (or returning the statistics):
    # the same arithmetic, written out.
    axes = list(range(axis, len(shape)))
    mean = reduce(e, ReduceFn.MEAN, op.X, axes, True)
    centered = binary(e, BinaryFn.SUB, op.X, mean)
    var = reduce(e, ReduceFn.MEAN, binary(e, BinaryFn.MUL, centered, centered), axes, True)
    inv_std = unary(e, UnaryFn.RECIPROCAL, unary(e, UnaryFn.SQRT, binary(e, BinaryFn.ADD, var, scalar(e, eps, var))))
    y = binary(e, BinaryFn.MUL, binary(e, BinaryFn.MUL, centered, inv_std), op.Scale)
    if op.B is not None:
        y = binary(e, BinaryFn.ADD, y, op.B)
    return [y, mean, inv_std][: len(op.results)]


@lowers(onnx.RMSNormalizationOp)
def _rms_norm(op: onnx.RMSNormalizationOp, e: Emitter):
    shape = static_shape(op.X, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    axes = list(range(axis, len(shape)))
    mean_square = reduce(e, ReduceFn.MEAN, binary(e, BinaryFn.MUL, op.X, op.X), axes, True)
    eps = op.epsilon.value.data
    rms = unary(e, UnaryFn.SQRT, binary(e, BinaryFn.ADD, mean_square, scalar(e, eps, mean_square)))
    return [binary(e, BinaryFn.MUL, binary(e, BinaryFn.DIV, op.X, rms), op.scale)]


@lowers(onnx.LpNormalizationOp)
def _lp_norm(op: onnx.LpNormalizationOp, e: Emitter):
    shape = static_shape(op.input, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    p = op.p.value.data
    x = op.input
    if p == 1:
        norm = reduce(e, ReduceFn.SUM, unary(e, UnaryFn.ABS, x), [axis], True)
    elif p == 2:
        norm = unary(e, UnaryFn.SQRT, reduce(e, ReduceFn.SUM, binary(e, BinaryFn.MUL, x, x), [axis], True))
    else:
        raise e.error(f"p={p} is not supported (1 or 2)")
    return [binary(e, BinaryFn.DIV, x, norm)]


@lowers(onnx.MeanVarianceNormalizationOp)
def _mvn(op: onnx.MeanVarianceNormalizationOp, e: Emitter):
    x = op.X
    axes = list(op.axes.get_values())
    mean = reduce(e, ReduceFn.MEAN, x, axes, True)
    centered = binary(e, BinaryFn.SUB, x, mean)
    var = reduce(e, ReduceFn.MEAN, binary(e, BinaryFn.MUL, centered, centered), axes, True)
    std = unary(e, UnaryFn.SQRT, var)
    return [binary(e, BinaryFn.DIV, centered, binary(e, BinaryFn.ADD, std, scalar(e, 1e-9, std)))]


@lowers(onnx.GroupNormalizationOp)
def _group_norm(op: onnx.GroupNormalizationOp, e: Emitter):
    shape = static_shape(op.X, e)
    groups = op.num_groups.value.data
    n, c = shape[0], shape[1]
    grouped = e.value(tir.ReshapeOp(op.X, [n, groups, (c // groups) * math.prod(shape[2:])]))
    mean = reduce(e, ReduceFn.MEAN, grouped, [2], True)
    centered = binary(e, BinaryFn.SUB, grouped, mean)
    var = reduce(e, ReduceFn.MEAN, binary(e, BinaryFn.MUL, centered, centered), [2], True)
    eps = op.epsilon.value.data
    std = unary(e, UnaryFn.SQRT, binary(e, BinaryFn.ADD, var, scalar(e, eps, var)))
    normed = e.value(tir.ReshapeOp(binary(e, BinaryFn.DIV, centered, std), shape))
    bshape = [1, c] + [1] * (len(shape) - 2)
    scale = e.value(tir.ReshapeOp(op.scale, bshape))
    bias = e.value(tir.ReshapeOp(op.bias, bshape))
    return [binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, normed, scale), bias)]


def _zeros(shape, like):
    from forge_opt import dtypes
    from forge_opt.dialects.elements import array_to_attr

    return array_to_attr(np.zeros(shape, dtypes.numpy_dtype(like.type.element_type)))


@lowers(onnx.LRNOp)
def _lrn(op: onnx.LRNOp, e: Emitter):
    """x / (bias + alpha/size * sum of squares over a channel window)^beta.
    The window sum, times alpha/size, is one Matmul of a banded C x C
    constant with the squares laid out as [N, C, positions]."""
    shape = static_shape(op.X, e)
    size = op.size.value.data
    alpha, beta, bias = op.alpha.value.data, op.beta.value.data, op.bias.value.data
    n, channels = shape[0], shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = binary(e, BinaryFn.MUL, op.X, op.X)
    offsets = np.arange(channels)[None, :] - np.arange(channels)[:, None]  # j - i
    band = ((offsets >= -lo) & (offsets <= hi)) * (alpha / size)
    dtype = dtypes.numpy_dtype(dtypes.tensor(op.X.type).element_type)
    positions = math.prod(shape[2:])
    flat = e.value(tir.ReshapeOp(square, [n, channels, positions]))
    summed = e.value(tir.MatmulOp(constant(e, band.astype(dtype)), flat))
    scaled = e.value(tir.ReshapeOp(summed, shape))
    base = binary(e, BinaryFn.ADD, scaled, scalar(e, bias, scaled))
    denom = binary(e, BinaryFn.POW, base, scalar(e, beta, base))
    return [binary(e, BinaryFn.DIV, op.X, denom)]


@lowers(onnx.InstanceNormalizationOp)
def _instance_norm(op: onnx.InstanceNormalizationOp, e: Emitter):
    """(x - mean) / sqrt(var + eps) * scale + bias over the spatial axes."""
    shape = static_shape(op.input, e)
    axes = list(range(2, len(shape)))
    mean = reduce(e, ReduceFn.MEAN, op.input, axes, True)
    centered = binary(e, BinaryFn.SUB, op.input, mean)
    var = reduce(e, ReduceFn.MEAN, binary(e, BinaryFn.MUL, centered, centered), axes, True)
    denom = unary(e, UnaryFn.SQRT, binary(e, BinaryFn.ADD, var, scalar(e, op.epsilon.value.data, var)))
    normed = binary(e, BinaryFn.DIV, centered, denom)
    bshape = [1, shape[1]] + [1] * (len(shape) - 2)
    scale = e.value(tir.ReshapeOp(op.scale, bshape))
    bias = e.value(tir.ReshapeOp(op.B, bshape))
    return [binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, normed, scale), bias)]

