"""The result shape of every `forge.op` function, as Forge's C++ `shape()`
computes it, from a call that passed Forge's rules (`forge_rules.check_call`).

Forge itself asserts that its golden's value has the shape `shape()` gives
(rule shape-vs-eval, forge/forge/tensor.py `TensorFromTrace.set_value`). So
the `forge` dialect's verifier compares each result type with `result_shape`,
and the stand-in compares each kernel's value with it: a shape function that
disagrees with its kernel fails every test that runs the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_api import FUNCTIONS
from forge_opt.dialects.forge_rules import Call, index_stop

Shape = tuple[int, ...]

SHAPES: dict[str, Callable[[Call], Shape]] = {}


def result_shape(call: Call) -> Shape:
    """The shape of the call's result (the call has passed Forge's rules)."""
    return SHAPES[call.function](call)


def _shape_of(*functions: str):
    def register(fn: Callable[[Call], Shape]):
        for name in functions:
            assert name not in SHAPES, name
            SHAPES[name] = fn
        return fn

    return register


def _pair(v) -> tuple[int, int]:
    """An int for both spatial dims, or (h, w)."""
    return (v, v) if isinstance(v, int) else (v[0], v[1])


def _nchw(call: Call) -> tuple[int, int, int, int]:
    n, a, b, c = call.shape(0)
    return (n, c, a, b) if call.keywords.get("channel_last") else (n, a, b, c)


def _image(call: Call, channels: int, h: int, w: int) -> Shape:
    n = call.shape(0)[0]
    return (n, h, w, channels) if call.keywords.get("channel_last") else (n, channels, h, w)


def _axis(call: Call, key: str = "dim", rank: int | None = None) -> int:
    rank = call.rank if rank is None else rank
    return call.keywords[key] % rank


@_shape_of(
    "Add", "Subtract", "Multiply", "Divide", "Max", "Min", "Power", "Remainder",
    "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "Where",
)
def _elementwise(call: Call) -> Shape:
    return tuple(shapes.broadcast(*(s for s in call.shapes if s is not None)))


@_shape_of(
    "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Abs", "Sine", "Cosine", "Atan", "Erf",
    "LogicalNot", "Gelu", "LeakyRelu", "Clip", "Cast", "Identity", "Softmax", "LogSoftmax", "Layernorm",
    "Batchnorm", "CumSum",
)
def _same(call: Call) -> Shape:
    return call.shape(0)


@_shape_of("Matmul")
def _matmul(call: Call) -> Shape:
    """op_matmul.cpp shape(): 1-D operands as torch.matmul takes them; the
    bias is a separate Add that may not widen the product (rule matmul-bias)."""
    a, b = call.shape(0), call.shape(1)
    if len(a) == 1 and len(b) == 1:  # a dot product
        return ()
    if len(a) == 1:  # [K] x [..., K, N]
        return (*b[:-2], b[-1])
    if len(b) == 1:  # [..., M, K] x [K]
        return (*a[:-2], a[-2])
    return (*shapes.broadcast(a[:-2], b[:-2]), a[-2], b[-1])


@_shape_of("Conv2d")
def _conv2d(call: Call) -> Shape:
    _, _, h, w = _nchw(call)
    cout, _, kh, kw = call.shape(1)
    (sh, sw), (dh, dw) = _pair(call.keywords["stride"]), _pair(call.keywords["dilation"])
    top, left, bottom, right = call.keywords["padding"]  # rule conv-operands: an explicit 4-list
    return _image(
        call, cout, shapes.window_size(h, kh, sh, dh, top, bottom), shapes.window_size(w, kw, sw, dw, left, right)
    )


@_shape_of("Conv2dTranspose")
def _conv2d_transpose(call: Call) -> Shape:
    _, _, h, w = _nchw(call)
    _, cout_group, kh, kw = call.shape(1)
    kw_ = call.keywords
    (sh, sw), (dh, dw), (eh, ew) = _pair(kw_["stride"]), _pair(kw_["dilation"]), _pair(kw_["output_padding"])
    padding = kw_["padding"]  # rule convtranspose-operands: an int or a symmetric 4-tuple
    ph, pw = (padding, padding) if isinstance(padding, int) else (padding[0], padding[1])
    out_h = (h - 1) * sh + dh * (kh - 1) + 1 + eh - 2 * ph
    out_w = (w - 1) * sw + dw * (kw - 1) + 1 + ew - 2 * pw
    return _image(call, cout_group * kw_["groups"], out_h, out_w)


@_shape_of("MaxPool2d", "AvgPool2d")
def _pool2d(call: Call) -> Shape:
    _, c, h, w = _nchw(call)
    (kh, kw), (sh, sw) = _pair(call.keywords["kernel_size"]), _pair(call.keywords["stride"])
    padding = call.keywords["padding"]  # rule pool-symmetric: an int or a [left, right, top, bottom] list
    left, right, top, bottom = (padding,) * 4 if isinstance(padding, int) else padding
    return _image(call, c, shapes.window_size(h, kh, sh, 1, top, bottom), shapes.window_size(w, kw, sw, 1, left, right))


@_shape_of("ReduceSum", "ReduceAvg", "ReduceMax")
def _reduce(call: Call) -> Shape:
    return tuple(shapes.reduce(call.shape(0), [_axis(call)], call.keywords["keep_dim"]))


@_shape_of("Argmax")
def _argmax(call: Call) -> Shape:
    if call.keywords["dim"] is None:  # over every element
        return (1,) * call.rank if call.keywords["keep_dim"] else ()
    return _reduce(call)


@_shape_of("Transpose")
def _transpose(call: Call) -> Shape:
    out = list(call.shape(0))
    a, b = _axis(call, "dim0"), _axis(call, "dim1")
    out[a], out[b] = out[b], out[a]
    return tuple(out)


@_shape_of("Reshape")
def _reshape(call: Call) -> Shape:
    target = list(call.keywords["shape"])
    if -1 in target:  # rule reshape-volume: one -1 at most, and it divides
        target[target.index(-1)] = math.prod(call.shape(0)) // math.prod(d for d in target if d != -1)
    return tuple(target)


@_shape_of("Index")
def _index(call: Call) -> Shape:
    out = list(call.shape(0))
    dim = _axis(call)
    out[dim] = len(range(call.keywords["start"], index_stop(call), call.keywords["stride"]))
    return tuple(out)


@_shape_of("Broadcast")
def _broadcast(call: Call) -> Shape:
    shape, dim = call.shape(0), call.keywords["dim"]
    rank = max(len(shape), -dim if dim < 0 else dim + 1)  # leading dims are unsqueezed first
    out = [1] * (rank - len(shape)) + list(shape)
    out[dim] = call.keywords["shape"]
    return tuple(out)


@_shape_of("Repeat")
def _repeat(call: Call) -> Shape:
    repeats, shape = list(call.keywords["repeats"]), call.shape(0)
    rank = max(len(repeats), len(shape))
    repeats = [1] * (rank - len(repeats)) + repeats
    padded = [1] * (rank - len(shape)) + list(shape)
    return tuple(d * r for d, r in zip(padded, repeats))


@_shape_of("Unsqueeze")
def _unsqueeze(call: Call) -> Shape:
    out = list(call.shape(0))
    out.insert(_axis(call, rank=call.rank + 1), 1)
    return tuple(out)


@_shape_of("Squeeze")
def _squeeze(call: Call) -> Shape:
    out = list(call.shape(0))
    del out[_axis(call)]
    return tuple(out)


@_shape_of("ConstantPad")
def _constant_pad(call: Call) -> Shape:
    return tuple(shapes.pad(call.shape(0), call.keywords["padding"]))


@_shape_of("Pad")
def _pad(call: Call) -> Shape:
    out, pad = list(call.shape(0)), call.keywords["pad"]
    last = -2 if call.keywords["channel_last"] else -1  # channel-last pads the dims before the channels
    for i in range(len(pad) // 2):
        out[last - i] += pad[2 * i] + pad[2 * i + 1]
    return tuple(out)


@_shape_of("AdvIndex")
def _adv_index(call: Call) -> Shape:
    out = list(call.shape(0))
    out[_axis(call)] = math.prod(call.shape(1))  # 2-D indices are flattened
    return tuple(out)


@_shape_of("Concatenate")
def _concatenate(call: Call) -> Shape:
    return tuple(shapes.concat([call.shape(i) for i in range(len(call.shapes))], _axis(call, "axis")))


@_shape_of("Embedding")
def _embedding(call: Call) -> Shape:
    return (*call.shape(0), call.shape(1)[1])


assert SHAPES.keys() == {f.name for f in FUNCTIONS}, sorted({f.name for f in FUNCTIONS} ^ SHAPES.keys())
