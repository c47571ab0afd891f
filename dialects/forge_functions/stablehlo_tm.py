"""StableHLO forms of Forge's tensor manipulations and convolutions: each
computes what the record's golden computes (`tm.py`, `conv.py`)."""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import stablehlo as hlo
from forge_opt.dialects.forge_functions.conv import ceil_extra, pair, pool_pad
from forge_opt.dialects.forge_functions.record import Call
from forge_opt.dialects.forge_functions.stablehlo_form import registry
from forge_opt.dialects.forge_functions.tm import index_stop
from forge_opt.dialects.stablehlo_build import Hlo, element, shape, tensor

FORMS, form = registry()

_TO_NCHW, _TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


@form("Transpose")
def _transpose(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    rank = len(shape(args[0]))
    order = list(range(rank))
    a, b = call.keywords["dim0"] % rank, call.keywords["dim1"] % rank
    order[a], order[b] = b, a
    return h.transpose(args[0], order)


@form("Reshape", "Unsqueeze", "Squeeze")
def _reshape(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    return h.reshape(args[0], out.get_shape())


@form("Index")
def _index(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    axis = call.keywords["dim"] % len(shape(x))
    start, stop, stride = slice(call.keywords["start"], index_stop(call), call.keywords["stride"]).indices(
        shape(x)[axis])
    if stride < 0:  # on a dim of size 1 (rule index-stride): one element or none
        return h.slice_axis(x, axis, start, start + out.get_shape()[axis])
    return h.slice_axis(x, axis, start, stop, stride)


@form("Broadcast")
def _broadcast(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = args[0]
    x = h.reshape(x, (1,) * (len(out.get_shape()) - len(shape(x))) + shape(x))
    return h.broadcast_to(x, out.get_shape())


@form("Repeat")
def _repeat(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """np.tile: each dim d repeated r times is [r, d] broadcast, then merged."""
    x = args[0]
    dims = out.get_shape()
    padded = (1,) * (len(dims) - len(shape(x))) + shape(x)
    repeats = [o // d for o, d in zip(dims, padded)]
    x = h.reshape(x, padded)
    interleaved = [v for r, d in zip(repeats, padded) for v in (r, d)]
    spread = h.add(hlo.BroadcastInDimOp([x], tensor(element(x), interleaved), {
        "broadcast_dimensions": hlo.i64_array(range(1, 2 * len(padded), 2))}))
    return h.reshape(spread, dims)


@form("Pad")
def _pad(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """F.pad order on the last dims: (left, right[, top, bottom])."""
    x = args[0]
    channel_last = call.keywords["channel_last"]
    rank = len(shape(x))
    if channel_last:
        x = h.transpose(x, [*range(rank - 3), rank - 1, rank - 3, rank - 2])
    pad, mode = call.keywords["pad"], call.keywords["mode"]
    for i in range(len(pad) // 2):
        axis, low, high = rank - 1 - i, pad[2 * i], pad[2 * i + 1]
        if mode == "constant":
            lows, highs = [0] * rank, [0] * rank
            lows[axis], highs[axis] = low, high
            x = h.pad(x, h.full(call.keywords["value"], element(x)), lows, highs)
            continue
        n = shape(x)[axis]
        if mode == "replicate":
            edges = [h.slice_axis(x, axis, 0, 1), h.slice_axis(x, axis, n - 1, n)]
            parts = [_spread(h, edges[0], axis, low), x, _spread(h, edges[1], axis, high)]
        else:  # reflect: the edge itself is not repeated
            parts = [h.reverse(h.slice_axis(x, axis, 1, low + 1), [axis]) if low else None, x,
                     h.reverse(h.slice_axis(x, axis, n - 1 - high, n - 1), [axis]) if high else None]
        x = h.concat([p for p in parts if p is not None and shape(p)[axis]], axis)
    if channel_last:
        x = h.transpose(x, [*range(rank - 3), rank - 2, rank - 1, rank - 3])
    return x


def _spread(h: Hlo, edge: SSAValue, axis: int, count: int) -> SSAValue:
    dims = list(shape(edge))
    dims[axis] = count
    return h.broadcast_to(edge, dims)


@form("AdvIndex")
def _adv_index(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x, indices = args
    return h.take(x, h.reshape(indices, [math.prod(shape(indices))]), call.keywords["dim"] % len(shape(x)))


@form("Concatenate")
def _concatenate(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    parts = [h.convert(v, out.element_type) for v in args if v is not None]
    return h.concat(parts, call.keywords["axis"] % len(shape(parts[0])))


# -- convolutions and pooling --------------------------------------------------------------


def _nchw(h: Hlo, call: Call, x: SSAValue) -> SSAValue:
    return h.transpose(x, _TO_NCHW) if call.keywords["channel_last"] else x


def _back(h: Hlo, call: Call, y: SSAValue, bias: SSAValue | None) -> SSAValue:
    if bias is not None:
        y = h.binary("add", y, h.reshape(bias, [1, math.prod(shape(bias)), 1, 1]))
    return h.transpose(y, _TO_NHWC) if call.keywords["channel_last"] else y


def _out_nchw(call: Call, out: TensorType) -> list[int]:
    dims = list(out.get_shape())
    return [dims[i] for i in _TO_NCHW] if call.keywords["channel_last"] else dims


@form("Conv2d")
def _conv2d(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x, w, bias = args
    kw = call.keywords
    top, left, bottom, right = kw["padding"]  # rule conv-operands: an explicit 4-list
    y = h.convolution(_nchw(h, call, x), h.convert(w, element(x)), _out_nchw(call, out), pair(kw["stride"]),
                      [(top, bottom), (left, right)], [1, 1], pair(kw["dilation"]), kw["groups"])
    return _back(h, call, y, bias)


@form("Conv2dTranspose")
def _conv2d_transpose(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """A convolution of the input dilated by the stride with the kernel
    flipped and its features swapped per group, padded by what the
    transposed convolution's padding leaves of the kernel's reach."""
    x, w, bias = args
    kw = call.keywords
    stride, dilation, extra = pair(kw["stride"]), pair(kw["dilation"]), pair(kw["output_padding"])
    padding = kw["padding"]
    pads = (padding, padding) if isinstance(padding, int) else (padding[0], padding[1])
    groups = kw["groups"]
    cin, cout_g, kh, kwd = shape(w)
    w = h.reshape(h.convert(w, element(x)), [groups, cin // groups, cout_g, kh, kwd])
    w = h.reshape(h.transpose(w, [0, 2, 1, 3, 4]), [groups * cout_g, cin // groups, kh, kwd])
    w = h.reverse(w, [2, 3])
    reach = [d * (k - 1) for d, k in zip(dilation, (kh, kwd))]
    edges = [(r - p, r - p + e) for r, p, e in zip(reach, pads, extra)]
    y = h.convolution(_nchw(h, call, x), w, _out_nchw(call, out), [1, 1], edges, stride, dilation, groups)
    return _back(h, call, y, bias)


def _pool_window(call: Call, x: SSAValue, dilation: tuple[int, int]) -> tuple[list[int], list[int], list, tuple]:
    """The window, its strides, the padding of each dim (ceil_mode's extra at
    the end included) and that extra, for each spatial dim."""
    kh, kw = pair(call.keywords["kernel_size"])
    stride = pair(call.keywords["stride"])
    top, bottom, left, right = pool_pad(call.keywords["padding"], kh, kw)
    h_in, w_in = shape(x)[2], shape(x)[3]
    ceil = call.keywords["ceil_mode"]
    eh = ceil_extra(h_in, (kh - 1) * dilation[0] + 1, stride[0], top, bottom, ceil)
    ew = ceil_extra(w_in, (kw - 1) * dilation[1] + 1, stride[1], left, right, ceil)
    return [1, 1, kh, kw], [1, 1, *stride], [(0, 0), (0, 0), (top, bottom + eh), (left, right + ew)], (eh, ew)


@form("MaxPool2d")
def _max_pool2d(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    x = _nchw(h, call, args[0])
    dilation = pair(call.keywords["dilation"])
    window, strides, padding, _ = _pool_window(call, x, dilation)
    y = h.reduce_window(x, "maximum", -math.inf, window, strides, padding,
                        None if dilation == (1, 1) else [1, 1, *dilation])
    return _back(h, call, y, None)


@form("AvgPool2d")
def _avg_pool2d(h: Hlo, call: Call, args, out: TensorType) -> SSAValue:
    """Window sums over the count PyTorch divides by: the window clipped to
    the padded input, or to the input where padding is not counted
    (shapes alone give it: a constant)."""
    x = _nchw(h, call, args[0])
    window, strides, padding, (eh, ew) = _pool_window(call, x, (1, 1))
    sums = h.reduce_window(x, "add", 0, window, strides, padding)
    divisor = call.keywords["divisor_override"]
    if divisor is None:
        (top, bottom), (left, right) = padding[2], padding[3]
        h_in, w_in = shape(x)[2], shape(x)[3]
        ones = np.zeros((h_in + top + bottom, w_in + left + right))
        if call.keywords["count_include_pad"]:
            ones[: top + h_in + bottom - eh, : left + w_in + right - ew] = 1
        else:
            ones[top: top + h_in, left: left + w_in] = 1
        view = np.lib.stride_tricks.sliding_window_view(ones, window[2:])[:: strides[2], :: strides[3]]
        counts = view.sum(axis=(2, 3)).astype(dtypes.numpy_dtype(element(x)))
        divisor_value = h.const(counts.reshape(1, 1, *counts.shape))
    else:
        divisor_value = h.full(divisor, element(x))
    return _back(h, call, h.binary("divide", sums, divisor_value), None)
