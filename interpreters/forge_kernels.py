"""numpy kernels of Forge's ops, shared by the `forge` dialect's interpreter
and the stand-in `forge.op` namespace, so both compute the same numbers.

Each kernel takes the operands as arrays and every keyword of the Forge
function (defaults filled in), and follows Forge's golden (PyTorch)
semantics, e.g. pooling padding as [left, right, top, bottom].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from forge_opt.dialects import forge_rules
from forge_opt.dtypes import is_narrow_float

KERNELS: dict[str, Callable[..., Any]] = {}


def evaluate(function: str, arrays, keywords: dict) -> np.ndarray:
    """Forge's golden for one call: the kernel's values in the element type
    Forge computes (`forge_rules.result_dtype`)."""
    dtypes_in = [None if a is None else a.dtype for a in arrays]
    # torch computes bfloat16 (and float8) ops in float32 and rounds the
    # result once; numpy on ml_dtypes would round inside some kernels
    wide = [a.astype(np.float32) if a is not None and is_narrow_float(a.dtype) else a for a in arrays]
    out = np.asarray(KERNELS[function](*wide, **keywords))
    call = forge_rules.Call(function, [], dtypes_in, keywords)
    return out.astype(forge_rules.result_dtype(call), copy=False)


def kernel(*names: str):
    def register(fn):
        for n in names:
            KERNELS[n] = fn
        return fn

    return register


def _binary(fn):
    return lambda a, b: fn(a, b)


for _name, _fn in {
    "Add": np.add,
    "Subtract": np.subtract,
    "Multiply": np.multiply,
    "Max": np.maximum,
    "Min": np.minimum,
    "Remainder": np.mod,
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "Less": np.less,
    "LessEqual": np.less_equal,
}.items():
    KERNELS[_name] = _binary(_fn)


@kernel("Divide")
def divide(a, b):
    """torch::div: true division, for integers too (op_divide.cpp)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


@kernel("Power")
def power(a, b):
    return np.power(a, b)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    return _erf(x).astype(x.dtype) if x.size else x.copy()


for _name, _fn in {
    "Exp": np.exp,
    "Sqrt": np.sqrt,
    "Sigmoid": lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype),
    "Tanh": np.tanh,
    "Abs": np.abs,
    "Sine": np.sin,
    "Cosine": np.cos,
    "Atan": np.arctan,
    "Erf": erf,
    "LogicalNot": np.logical_not,
}.items():
    KERNELS[_name] = _fn


def _epsilon(fn):
    """Forge's golden adds 1e-10 first, so log(0) and 1/0 are finite
    (op_log.cpp, op_reciprocal.cpp)."""
    def kernel_fn(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x + np.asarray(1e-10, x.dtype))
    return kernel_fn


KERNELS["Log"] = _epsilon(np.log)
KERNELS["Reciprocal"] = _epsilon(np.reciprocal)


@kernel("Relu")
def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


@kernel("Gelu")
def gelu(x, approximate="none"):
    if approximate == "tanh":
        return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype)


@kernel("LeakyRelu")
def leaky_relu(x, alpha):
    return np.where(x >= 0, x, alpha * x).astype(x.dtype)


@kernel("Clip")
def clip(x, min, max):
    return np.clip(x, min, max).astype(x.dtype)


@kernel("Cast")
def cast(x, dtype):
    """`.to()` the dtype of dtype's DataFormat: bool and int64 are Int32,
    so a cast to bool truncates (op_cast.cpp)."""
    with np.errstate(invalid="ignore"):
        return x.astype(forge_rules.format_dtype(dtype))


@kernel("Identity")
def identity(x, unsqueeze=None, unsqueeze_dim=None):
    return x


@kernel("Where")
def where(condition, x, y):
    return np.where(condition.astype(bool), x, y)


@kernel("Matmul")
def matmul(a, b, bias=None):
    # op_matmul.cpp's eval: float16 operands promoted to float32 (the result cast back by `evaluate`)
    a, b = (x.astype(np.float32) if x.dtype == np.float16 else x for x in (a, b))
    out = np.matmul(a, b)
    return out if bias is None else out + bias


def _pair(v) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[1])) if len(v) == 2 else (int(v[0]), int(v[0]))
    return (int(v), int(v))


def _windows(x, kernel_hw, stride, dilation):
    """(N, C, OH, OW, KH, KW) view of the windows of a padded NCHW array."""
    kh, kw = kernel_hw
    dh, dw = dilation
    span_h, span_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    view = np.lib.stride_tricks.sliding_window_view(x, (span_h, span_w), axis=(2, 3))
    return view[:, :, :: stride[0], :: stride[1], ::dh, ::dw]


# Forge's spellings: one int for both dims, or a pair; padding also "same".
IntOrPair = int | Sequence[int]
Padding = str | int | Sequence[int]


@kernel("Conv2d")
def conv2d(
    x, w, bias=None, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1, groups=1,
    channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    stride, dilation = _pair(stride), _pair(dilation)
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


@kernel("Conv2dTranspose")
def conv2d_transpose(
    x, w, bias=None, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1, groups=1,
    channel_last=False, output_padding: IntOrPair = 0,
):
    """torch's conv_transpose2d, as Forge's golden calls it: weights are
    (Cin, Cout/groups, kH, kW); padding [pH, pW] is cut from both ends."""
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    stride, dilation, extra = _pair(stride), _pair(dilation), _pair(output_padding)
    kh, kw = w.shape[2], w.shape[3]
    if padding == "same":  # the wrapper's [kW//2, kW//2, kH//2, kH//2], of which the op reads two
        pads = (kw // 2, kw // 2)
    elif isinstance(padding, tuple) and len(padding) == 4:  # (top, left, bottom, right)
        pads = (int(padding[0]), int(padding[1]))
    else:
        pads = _pair(padding)
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


def _pool_pad(padding: Padding, kh: int, kw: int) -> tuple[int, int, int, int]:
    """Forge's pooling padding [left, right, top, bottom] as (top, bottom, left, right)."""
    if padding == "same":
        return kh // 2, kh // 2, kw // 2, kw // 2
    if isinstance(padding, str | int):
        p = int(padding)
        return p, p, p, p
    left, right, top, bottom = (int(p) for p in padding)
    return top, bottom, left, right


def _ceil_extra(size, k, s, lo, hi, ceil_mode):
    """Extra padding at the end so ceil_mode windows exist (PyTorch's rule:
    the last window must start inside the input or the left padding)."""
    out = (size + lo + hi - k) / s + 1
    n = math.ceil(out) if ceil_mode else math.floor(out)
    if ceil_mode and (n - 1) * s >= size + lo:
        n -= 1
    return max(0, (n - 1) * s + k - (size + lo + hi))


@kernel("MaxPool2d")
def max_pool2d(
    x, kernel_size: IntOrPair, stride: IntOrPair = 1, padding: Padding = "same", dilation: IntOrPair = 1,
    ceil_mode=False, return_indices=False, max_pool_add_sub_surround=False,
    max_pool_add_sub_surround_value=1.0, channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    kh, kw = _pair(kernel_size)
    stride, dilation = _pair(stride), _pair(dilation)
    top, bottom, left, right = _pool_pad(padding, kh, kw)
    eh = _ceil_extra(x.shape[2], (kh - 1) * dilation[0] + 1, stride[0], top, bottom, ceil_mode)
    ew = _ceil_extra(x.shape[3], (kw - 1) * dilation[1] + 1, stride[1], left, right, ceil_mode)
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom + eh), (left, right + ew)), constant_values=-np.inf)
    out = _windows(x, (kh, kw), stride, dilation).max(axis=(4, 5))
    return out.transpose(0, 2, 3, 1) if channel_last else out


@kernel("AvgPool2d")
def avg_pool2d(
    x, kernel_size: IntOrPair, stride: IntOrPair = 1, padding: Padding = "same", ceil_mode=False,
    count_include_pad=True, divisor_override=None, channel_last=False,
):
    if channel_last:
        x = x.transpose(0, 3, 1, 2)
    kh, kw = _pair(kernel_size)
    stride = _pair(stride)
    top, bottom, left, right = _pool_pad(padding, kh, kw)
    eh = _ceil_extra(x.shape[2], kh, stride[0], top, bottom, ceil_mode)
    ew = _ceil_extra(x.shape[3], kw, stride[1], left, right, ceil_mode)
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


@kernel("Softmax")
def softmax(x, dim, stable=True):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return (e / e.sum(axis=dim, keepdims=True)).astype(x.dtype)


@kernel("LogSoftmax")
def log_softmax(x, dim, stable=True):
    shifted = x - x.max(axis=dim, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))).astype(x.dtype)


@kernel("Layernorm")
def layernorm(x, weights, bias, dim=-1, epsilon=1e-5):
    mean = x.mean(axis=dim, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=dim, keepdims=True)
    return ((x - mean) / np.sqrt(var + epsilon) * weights + bias).astype(x.dtype)


@kernel("Batchnorm")
def batchnorm(x, weights, bias, running_mean, running_var, epsilon=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = weights.reshape(shape) / np.sqrt(running_var.reshape(shape) + epsilon)
    return ((x - running_mean.reshape(shape)) * scale + bias.reshape(shape)).astype(x.dtype)


@kernel("ReduceSum")
def reduce_sum(x, dim, keep_dim=True):
    return x.sum(axis=dim, keepdims=keep_dim).astype(x.dtype)


@kernel("ReduceAvg")
def reduce_avg(x, dim, keep_dim=True):
    return x.mean(axis=dim, keepdims=keep_dim).astype(x.dtype)


@kernel("ReduceMax")
def reduce_max(x, dim, keep_dim=True):
    return x.max(axis=dim, keepdims=keep_dim)


@kernel("Argmax")
def argmax(x, dim=None, keep_dim=False):
    return np.argmax(x, axis=dim, keepdims=keep_dim)


@kernel("CumSum")
def cumsum(x, dim):
    return np.cumsum(x, axis=dim).astype(x.dtype)


@kernel("Transpose")
def transpose(x, dim0, dim1):
    return np.swapaxes(x, dim0, dim1)


@kernel("Reshape")
def reshape(x, shape):
    return x.reshape(shape)


@kernel("Index")
def index(x, dim, start, stop=None, stride=1):
    """Forge's Index: `t.slice(dim, start, stop, stride)`."""
    where = [slice(None)] * x.ndim
    where[dim] = slice(start, start + 1 if stop is None else stop, stride)
    return x[tuple(where)]


@kernel("Broadcast")
def broadcast(x, dim, shape):
    needed = -dim if dim < 0 else dim + 1
    while x.ndim < needed:
        x = x[np.newaxis]
    target = list(x.shape)
    target[dim] = shape
    return np.broadcast_to(x, target).copy()


@kernel("Repeat")
def repeat(x, repeats):
    return np.tile(x, repeats)


@kernel("Unsqueeze")
def unsqueeze(x, dim):
    return np.expand_dims(x, dim if dim >= 0 else x.ndim + 1 + dim)


@kernel("Squeeze")
def squeeze(x, dim):
    return np.squeeze(x, axis=dim)


@kernel("Pad")
def pad(x, pad, mode="constant", value=0.0, channel_last=False):
    """F.pad order: (left, right[, top, bottom]) on the last dims (op_pad.cpp)."""
    if channel_last:
        x = np.moveaxis(x, -1, -3)
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        out = np.pad(x, pairs, mode="constant", constant_values=value)
    elif mode == "replicate":
        out = np.pad(x, pairs, mode="edge")
    elif mode == "reflect":
        out = np.pad(x, pairs, mode="reflect")
    else:
        raise ValueError(f"Pad: no mode '{mode}'")
    return np.moveaxis(out, -3, -1) if channel_last else out


@kernel("AdvIndex")
def adv_index(a, b, dim=0):
    return np.take(a, b.reshape(-1).astype(np.int64), axis=dim)


@kernel("Concatenate")
def concatenate(*operands, axis):
    return np.concatenate(operands, axis=axis)


@kernel("Embedding")
def embedding(indices, embedding_table):
    return embedding_table[indices.astype(np.int64)]
