"""Forge's convolution and pooling functions (forge/forge/op/convolution.py,
pooling.py; forge/csrc/ops/op_conv_2d*.cpp, op_*_pool_2d.cpp): their
records, checks, shapes and goldens. Padding is spelled as each wrapper
takes it: a convolution's [top, left, bottom, right], a pooling's
[left, right, top, bottom]."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_functions.record import REQUIRED, Call, ForgeFunction, Shape, is_int, rule

# Forge's spellings: one int for both dims, or a pair; padding also "same".
IntOrPair = int | Sequence[int]
Padding = str | int | Sequence[int]


def pair(v) -> tuple[int, int]:
    """An int for both spatial dims, or (h, w)."""
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[1])) if len(v) == 2 else (int(v[0]), int(v[0]))
    return (int(v), int(v))


def _nchw(call: Call) -> tuple[int, int, int, int]:
    n, a, b, c = call.shape(0)
    return (n, c, a, b) if call.keywords.get("channel_last") else (n, a, b, c)


def _image(call: Call, channels: int, h: int, w: int) -> Shape:
    n = call.shape(0)[0]
    return (n, h, w, channels) if call.keywords.get("channel_last") else (n, channels, h, w)


def _windows(x, kernel_hw, stride, dilation):
    """(N, C, OH, OW, KH, KW) view of the windows of a padded NCHW array."""
    kh, kw = kernel_hw
    dh, dw = dilation
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    view = np.lib.stride_tricks.sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    return view[:, :, :: stride[0], :: stride[1], ::dh, ::dw]


# -- Conv2d -------------------------------------------------------------------------


@rule("conv-operands", "4-D activations and OIHW weights; padding an explicit [top, left, bottom, right] list (the "
      "default 'same' is symmetric)", "forge/forge/op/convolution.py; forge/csrc/ops/op_conv_2d.cpp")
def _conv_operands(call: Call) -> str | None:
    if len(call.shape(0)) != 4 or len(call.shape(1)) != 4:
        return f"activations {list(call.shape(0))} and weights {list(call.shape(1))} must be 4-D"
    padding = call.keywords["padding"]
    if not (isinstance(padding, list) and len(padding) == 4 and all(is_int(p) and p >= 0 for p in padding)):
        return f"padding must be an explicit [top, left, bottom, right] list, got {padding!r}"
    return None


def _conv2d_shape(call: Call) -> Shape:
    _, _, h, w = _nchw(call)
    cout, _, kh, kw = call.shape(1)
    (sh, sw), (dh, dw) = pair(call.keywords["stride"]), pair(call.keywords["dilation"])
    top, left, bottom, right = call.keywords["padding"]  # rule conv-operands: an explicit 4-list
    return _image(
        call, cout, shapes.window_size(h, kh, sh, dh, top, bottom), shapes.window_size(w, kw, sw, dw, left, right)
    )


def conv2d(
    x, w, bias=None, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1, groups=1,
    channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    stride, dilation = pair(stride), pair(dilation)
    kh, kw = w.shape[2], w.shape[3]
    if padding == "same":
        pads = [kh // 2, kw // 2, kh // 2, kw // 2]  # Forge's "same": symmetric
    elif isinstance(padding, str | int):
        pads = [int(padding)] * 4
    else:
        pads = [int(p) for p in padding]
    top, left, bottom, right = pads
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    c = x.shape[1]
    cout = w.shape[0]
    cin_g, cout_g = c // groups, cout // groups
    win = _windows(x, (kh, kw), stride, dilation)  # N C OH OW KH KW
    outs = []
    for g in range(groups):
        wg = w[g * cout_g : (g + 1) * cout_g]  # Cout_g Cin_g KH KW
        xg = win[:, g * cin_g : (g + 1) * cin_g]
        outs.append(np.einsum("nchwij,ocij->nohw", xg, wg, optimize=True))
    out = np.concatenate(outs, axis=1).astype(x.dtype)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.transpose(0, 2, 3, 1) if channel_last else out


# -- Conv2dTranspose ------------------------------------------------------------------


@rule("convtranspose-operands", "4-D activations and (Cin, Cout/groups, kH, kW) weights; padding an int or a (top, "
      "left, bottom, right) tuple with top == bottom and left == right (the wrapper's assert; the op reads [pH, pW])",
      "forge/forge/op/convolution.py; forge/csrc/ops/op_conv_2d_transpose.cpp")
def _conv_transpose_operands(call: Call) -> str | None:
    if len(call.shape(0)) != 4 or len(call.shape(1)) != 4:
        return f"activations {list(call.shape(0))} and weights {list(call.shape(1))} must be 4-D"
    padding = call.keywords["padding"]
    if is_int(padding) and padding >= 0:
        return None
    if isinstance(padding, tuple) and len(padding) == 4 and all(is_int(p) and p >= 0 for p in padding):
        top, left, bottom, right = padding
        return None if top == bottom and left == right else f"padding {padding!r} must be symmetric"
    return f"padding must be an int or a (top, left, bottom, right) tuple, got {padding!r}"


def _conv2d_transpose_shape(call: Call) -> Shape:
    _, _, h, w = _nchw(call)
    _, cout_group, kh, kw = call.shape(1)
    kw_ = call.keywords
    (sh, sw), (dh, dw), (eh, ew) = pair(kw_["stride"]), pair(kw_["dilation"]), pair(kw_["output_padding"])
    padding = kw_["padding"]  # rule convtranspose-operands: an int or a symmetric 4-tuple
    ph, pw = (padding, padding) if isinstance(padding, int) else (padding[0], padding[1])
    out_h = (h - 1) * sh + dh * (kh - 1) + 1 + eh - 2 * ph
    out_w = (w - 1) * sw + dw * (kw - 1) + 1 + ew - 2 * pw
    return _image(call, cout_group * kw_["groups"], out_h, out_w)


def conv2d_transpose(
    x, w, bias=None, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1, groups=1,
    channel_last=False, output_padding: IntOrPair = 0,
):
    """torch's conv_transpose2d, as Forge's golden calls it: weights are
    (Cin, Cout/groups, kH, kW); padding [pH, pW] is cut from both ends."""
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    stride, dilation, extra = pair(stride), pair(dilation), pair(output_padding)
    kh, kw = w.shape[2], w.shape[3]
    if padding == "same":  # the wrapper's [kW//2, kW//2, kH//2, kH//2], of which the op reads two
        pads = (kw // 2, kw // 2)
    elif isinstance(padding, tuple) and len(padding) == 4:  # (top, left, bottom, right)
        pads = (int(padding[0]), int(padding[1]))
    else:
        pads = pair(padding)
    n, c, h, wd = x.shape
    cin_g, cout_g = c // groups, w.shape[1]
    full_h = (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1 + extra[0]
    full_w = (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1 + extra[1]
    full = np.zeros((n, cout_g * groups, full_h, full_w), np.result_type(x, w))
    for g in range(groups):
        xg = x[:, g * cin_g : (g + 1) * cin_g]
        wg = w[g * cin_g : (g + 1) * cin_g]  # Cin_g Cout_g KH KW
        for i in range(kh):
            for j in range(kw):
                top, left = i * dilation[0], j * dilation[1]
                rows = slice(top, top + (h - 1) * stride[0] + 1, stride[0])
                cols = slice(left, left + (wd - 1) * stride[1] + 1, stride[1])
                full[:, g * cout_g : (g + 1) * cout_g, rows, cols] += np.einsum("nchw,co->nohw", xg, wg[:, :, i, j])
    out_h = full_h - 2 * pads[0]
    out_w = full_w - 2 * pads[1]
    out = full[:, :, pads[0] : pads[0] + out_h, pads[1] : pads[1] + out_w].astype(x.dtype)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.transpose(0, 2, 3, 1) if channel_last else out


# -- MaxPool2d and AvgPool2d ------------------------------------------------------------


@rule("maxpool-kernel-type", "kernel_size is an int or a tuple of ints (a list fails the assert)",
      "forge/forge/op/pooling.py MaxPool2d")
def _maxpool_kernel(call: Call) -> str | None:
    k = call.keywords["kernel_size"]
    if is_int(k) or (isinstance(k, tuple) and all(is_int(x) for x in k)):
        return None
    return f"kernel_size must be an int or a tuple, got {k!r}"


def _pool_padding(padding: object) -> list[int] | None:
    """Forge's [left, right, top, bottom], from what the wrapper accepts."""
    if is_int(padding):
        return [padding] * 4
    if isinstance(padding, list) and len(padding) == 4 and all(is_int(p) for p in padding):
        return padding
    return None


@rule("pool-symmetric", "padding [left, right, top, bottom] with left == right and top == bottom",
      "forge/csrc/ops/op_max_pool_2d.cpp, op_avg_pool_2d.cpp shape()")
def _pool_symmetric(call: Call) -> str | None:
    padding = _pool_padding(call.keywords["padding"])
    if padding is None:
        return f"padding must be an int or a [left, right, top, bottom] list, got {call.keywords['padding']!r}"
    left, right, top, bottom = padding
    if left != right or top != bottom:
        return f"padding {padding} ([left, right, top, bottom]) must be symmetric"
    return None


@rule("pool-flags", "dilation 1, return_indices False, divisor_override None; no ceil_mode (shape() takes the plain "
      "ceiling where the golden drops a window starting in the padding)",
      "forge/forge/op/pooling.py; forge/csrc/ops/op_max_pool_2d.cpp, op_avg_pool_2d.cpp")
def _pool_flags(call: Call) -> str | None:
    kw = call.keywords
    if kw.get("dilation", 1) not in (1, [1, 1], (1, 1)):
        return f"dilation {kw['dilation']!r} must be 1"
    if kw.get("return_indices") or kw.get("divisor_override") is not None:
        return "return_indices must be False and divisor_override None"
    if kw["ceil_mode"]:
        return "ceil_mode must be False (pad explicitly instead)"
    return None


def _pool2d_shape(call: Call) -> Shape:
    _, c, h, w = _nchw(call)
    (kh, kw), (sh, sw) = pair(call.keywords["kernel_size"]), pair(call.keywords["stride"])
    padding = call.keywords["padding"]  # rule pool-symmetric: an int or a [left, right, top, bottom] list
    left, right, top, bottom = (padding,) * 4 if isinstance(padding, int) else padding
    return _image(call, c, shapes.window_size(h, kh, sh, 1, top, bottom), shapes.window_size(w, kw, sw, 1, left, right))


def pool_pad(padding: Padding, kh: int, kw: int) -> tuple[int, int, int, int]:
    """Forge's pooling padding [left, right, top, bottom] as (top, bottom, left, right)."""
    if padding == "same":
        return kh // 2, kh // 2, kw // 2, kw // 2
    if isinstance(padding, str | int):
        p = int(padding)
        return p, p, p, p
    left, right, top, bottom = (int(p) for p in padding)
    return top, bottom, left, right


def ceil_extra(size, k, s, lo, hi, ceil_mode):
    """Extra padding at the end so ceil_mode windows exist (PyTorch's rule:
    the last window must start inside the input or the left padding)."""
    out = (size + lo + hi - k) / s + 1
    n = math.ceil(out) if ceil_mode else math.floor(out)
    if ceil_mode and (n - 1) * s >= size + lo:
        n -= 1
    return max(0, (n - 1) * s + k - (size + lo + hi))


def max_pool2d(
    x, kernel_size: IntOrPair, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1,
    ceil_mode=False, return_indices=False, max_pool_add_sub_surround=False,
    max_pool_add_sub_surround_value=1.0, channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    kh, kw = pair(kernel_size)
    stride, dilation = pair(stride), pair(dilation)
    top, bottom, left, right = pool_pad(padding, kh, kw)
    eh = ceil_extra(x.shape[2], (kh - 1) * dilation[0] + 1, stride[0], top, bottom, ceil_mode)
    ew = ceil_extra(x.shape[3], (kw - 1) * dilation[1] + 1, stride[1], left, right, ceil_mode)
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom + eh), (left, right + ew)), constant_values=-np.inf)
    out = _windows(x, (kh, kw), stride, dilation).max(axis=(4, 5))
    return out.transpose(0, 2, 3, 1) if channel_last else out


def avg_pool2d(
    x, kernel_size: IntOrPair, stride: IntOrPair = 1, padding: Padding = "same", ceil_mode=False,
    count_include_pad=True, divisor_override=None, channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    kh, kw = pair(kernel_size)
    stride = pair(stride)
    top, bottom, left, right = pool_pad(padding, kh, kw)
    eh = ceil_extra(x.shape[2], kh, stride[0], top, bottom, ceil_mode)
    ew = ceil_extra(x.shape[3], kw, stride[1], left, right, ceil_mode)
    h, w = x.shape[2], x.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom + eh), (left, right + ew)))
    sums = _windows(xp, (kh, kw), stride, (1, 1)).sum(axis=(4, 5))
    # PyTorch divides by the window clipped to the padded input, or by the
    # part inside the input when padding is not counted.
    ones = np.zeros((1, 1) + xp.shape[2:], x.dtype)
    if count_include_pad:
        ones[:, :, : top + h + bottom, : left + w + right] = 1
    else:
        ones[:, :, top : top + h, left : left + w] = 1
    counts = _windows(ones, (kh, kw), stride, (1, 1)).sum(axis=(4, 5))
    out = (sums / (divisor_override or counts)).astype(x.dtype)
    return out.transpose(0, 2, 3, 1) if channel_last else out


_CONV_OPERANDS = (("activations", "single"), ("weights", "single"), ("bias", "optional"))
_CONV_KEYWORDS = (("stride", 1), ("padding", "same"), ("dilation", 1), ("groups", 1), ("channel_last", False))

FUNCTIONS = (
    ForgeFunction("Conv2d", _CONV_OPERANDS, _conv2d_shape, conv2d, keywords=_CONV_KEYWORDS, rules=(_conv_operands,)),
    ForgeFunction(
        "Conv2dTranspose", _CONV_OPERANDS, _conv2d_transpose_shape, conv2d_transpose,
        keywords=(*_CONV_KEYWORDS, ("output_padding", 0)), tuple_keywords=("padding",),
        rules=(_conv_transpose_operands,),
    ),
    ForgeFunction(
        "MaxPool2d", (("activations", "single"),), _pool2d_shape, max_pool2d,
        keywords=(
            ("kernel_size", REQUIRED), ("stride", 1), ("padding", "same"), ("dilation", 1),
            ("ceil_mode", False), ("return_indices", False), ("max_pool_add_sub_surround", False),
            ("max_pool_add_sub_surround_value", 1.0), ("channel_last", False),
        ),
        tuple_keywords=("kernel_size",), rules=(_maxpool_kernel, _pool_symmetric, _pool_flags),
    ),
    ForgeFunction(
        "AvgPool2d", (("activations", "single"),), _pool2d_shape, avg_pool2d,
        keywords=(
            ("kernel_size", REQUIRED), ("stride", 1), ("padding", "same"), ("ceil_mode", False),
            ("count_include_pad", True), ("divisor_override", None), ("channel_last", False),
        ),
        rules=(_pool_symmetric, _pool_flags),
    ),
)
