"""Result shapes of the `tir` ops, one function per op.

Each op's builder computes its result type with its function here, and its
verifier calls the same function on the op's operands and properties and
compares (onnx-mlir's ShapeHelper idea): the two cannot disagree. A function
raises `ShapeError` for operands the op cannot take; a lowering that builds
such an op reports it as an error of the ONNX node being lowered.

A dynamic dimension (`DYNAMIC`, xDSL's `DYNAMIC_INDEX`, printed `?`; every
test here reads any negative size as one) stays dynamic: it matches any size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import DYNAMIC_INDEX

Shape = list[int]

DYNAMIC = DYNAMIC_INDEX


class ShapeError(ValueError):
    """Operands or properties an op cannot take."""


def _axis(axis: int, rank: int) -> int:
    if not 0 <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for rank {rank} (normalise to 0..{rank - 1})")
    return axis


def _dim_eq(a: int, b: int) -> bool:
    return a == b or a < 0 or b < 0


def broadcast(*shapes: Sequence[int]) -> Shape:
    """numpy broadcasting: align from the right, a 1 stretches."""
    rank = max(len(s) for s in shapes)
    padded = [[1] * (rank - len(s)) + list(s) for s in shapes]
    out = []
    for dims in zip(*padded):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1 and not any(d < 0 for d in sizes):
            raise ShapeError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(max(sizes, default=1) if not any(d < 0 for d in sizes) else DYNAMIC)
    return out


def matmul(lhs: Sequence[int], rhs: Sequence[int]) -> Shape:
    """numpy matmul of operands of rank 2 or more (1-D operands are reshaped
    by the lowering first)."""
    if len(lhs) < 2 or len(rhs) < 2:
        raise ShapeError(f"matmul needs operands of rank 2 or more, not {list(lhs)} and {list(rhs)}")
    if not _dim_eq(lhs[-1], rhs[-2]):
        raise ShapeError(f"matmul shapes {list(lhs)} and {list(rhs)} do not agree")
    return [*broadcast(lhs[:-2], rhs[:-2]), lhs[-2], rhs[-1]]


def window_size(size: int, kernel: int, stride: int, dilation: int, lo: int, hi: int, ceil_mode: bool = False) -> int:
    """Windows along one spatial dim (ONNX and PyTorch: with ceil_mode the
    last window must start inside the input or its leading padding)."""
    span = (kernel - 1) * dilation + 1
    n = (size + lo + hi - span) / stride + 1
    if not ceil_mode:
        return math.floor(n)
    out = math.ceil(n)
    if (out - 1) * stride >= size + lo:
        out -= 1
    return out


def _window_params(name: str, kernel, strides, pads, dilations) -> None:
    for what, values, length in (
        ("kernel", kernel, 2),
        ("strides", strides, 2),
        ("pads", pads, 4),
        ("dilations", dilations, 2),
    ):
        if len(values) != length:
            raise ShapeError(f"{name} {what} must have {length} values, not {list(values)}")
    if min(*kernel, *strides, *dilations) < 1 or min(pads) < 0:
        raise ShapeError(f"{name} kernel, strides and dilations must be positive and pads not negative")


def _windows(input: Sequence[int], kernel, strides, pads, dilations, ceil_mode: bool) -> Shape:
    top, left, bottom, right = pads
    out = []
    for i, (lo, hi) in enumerate(((top, bottom), (left, right))):
        size = input[2 + i]
        n = DYNAMIC if size < 0 else window_size(size, kernel[i], strides[i], dilations[i], lo, hi, ceil_mode)
        if size >= 0 and n < 1:
            raise ShapeError(f"the window does not fit: dim {2 + i} of size {size} gives {n} windows")
        out.append(n)
    return out


def conv2d(input, weight, bias, strides, pads, dilations, groups: int) -> Shape:
    """NCHW by OIHW, `pads` [top, left, bottom, right]."""
    if len(input) != 4 or len(weight) != 4:
        raise ShapeError(f"conv2d needs a rank-4 input and weight, not {list(input)} and {list(weight)}")
    _window_params("conv2d", weight[2:], strides, pads, dilations)
    if groups < 1 or not _dim_eq(input[1], weight[1] * groups) or weight[0] % groups:
        raise ShapeError(f"input channels {input[1]} and weight {list(weight)} do not agree for {groups} groups")
    if bias is not None and list(bias) != [weight[0]]:
        raise ShapeError(f"bias has shape {list(bias)}, expected [{weight[0]}]")
    return [input[0], weight[0], *_windows(input, weight[2:], strides, pads, dilations, False)]


def conv_transpose2d(input, weight, bias, strides, pads, dilations, output_padding, groups: int) -> Shape:
    """NCHW by (Cin, Cout/groups, kH, kW) weights, as torch's conv_transpose2d;
    `pads` [pH, pW] taken from both ends of each dim."""
    if len(input) != 4 or len(weight) != 4:
        raise ShapeError(f"conv_transpose2d needs a rank-4 input and weight, not {list(input)} and {list(weight)}")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations) or any(p < 0 for p in pads):
        raise ShapeError("conv_transpose2d strides and dilations must be positive and pads not negative")
    if any(not 0 <= o < max(s, d) for o, s, d in zip(output_padding, strides, dilations)):
        raise ShapeError(f"output_padding {list(output_padding)} must be below the stride or the dilation")
    if groups < 1 or not _dim_eq(input[1], weight[0]) or weight[0] % groups:
        raise ShapeError(f"input channels {input[1]} and weight {list(weight)} do not agree for {groups} groups")
    cout = weight[1] * groups
    if bias is not None and list(bias) != [cout]:
        raise ShapeError(f"bias has shape {list(bias)}, expected [{cout}]")
    out = []
    for i in range(2):
        size = input[2 + i]
        n = (size - 1) * strides[i] - 2 * pads[i] + dilations[i] * (weight[2 + i] - 1) + output_padding[i] + 1
        out.append(DYNAMIC if size < 0 else n)
        if size >= 0 and n < 1:
            raise ShapeError(f"the padding leaves no output on dim {2 + i}")
    return [input[0], cout, *out]


def pool2d(input, kernel, strides, pads, dilations, ceil_mode: bool) -> Shape:
    if len(input) != 4:
        raise ShapeError(f"pool2d needs a rank-4 input, not {list(input)}")
    _window_params("pool2d", kernel, strides, pads, dilations)
    return [input[0], input[1], *_windows(input, kernel, strides, pads, dilations, ceil_mode)]


def per_channel(input: Sequence[int], channel_dim: int, *params: Sequence[int]) -> Shape:
    """Ops whose parameters are vectors over one dim (batchnorm's channels,
    layernorm's last dim): the result has the input's shape."""
    if not -len(input) <= channel_dim < len(input):
        raise ShapeError(f"an input of rank {len(input)} has no dim {channel_dim}")
    for p in params:
        if len(p) != 1 or not _dim_eq(p[0], input[channel_dim]):
            raise ShapeError(f"a parameter of shape {list(p)} does not match dim {channel_dim} of {list(input)}")
    return list(input)


def same(input: Sequence[int], axis: int | None = None) -> Shape:
    """Element-wise or along-an-axis ops: the input's shape."""
    if axis is not None:
        _axis(axis, len(input))
    return list(input)


def reshape(input: Sequence[int], shape: Sequence[int]) -> Shape:
    if all(d >= 0 for d in [*input, *shape]) and math.prod(input) != math.prod(shape):
        raise ShapeError(f"cannot reshape {list(input)} into {list(shape)}")
    return list(shape)


def broadcast_to(input: Sequence[int], shape: Sequence[int]) -> Shape:
    if len(input) > len(shape) or broadcast(input, shape) != list(shape):
        raise ShapeError(f"{list(input)} does not broadcast to {list(shape)}")
    return list(shape)


def transpose(input: Sequence[int], perm: Sequence[int]) -> Shape:
    if sorted(perm) != list(range(len(input))):
        raise ShapeError(f"perm {list(perm)} is not a permutation of the {len(input)} dims")
    return [input[p] for p in perm]


def concat(inputs: Sequence[Sequence[int]], axis: int) -> Shape:
    if not inputs:
        raise ShapeError("concat needs at least one input")
    first = list(inputs[0])
    _axis(axis, len(first))
    for s in inputs[1:]:
        if len(s) != len(first) or not all(_dim_eq(a, b) for i, (a, b) in enumerate(zip(s, first)) if i != axis):
            raise ShapeError(f"shapes {[list(s) for s in inputs]} differ outside axis {axis}")
    sizes = [s[axis] for s in inputs]
    first[axis] = DYNAMIC if any(d < 0 for d in sizes) else sum(sizes)
    return first


def reduce(input: Sequence[int], axes: Sequence[int], keepdims: bool) -> Shape:
    for a in axes:
        _axis(a, len(input))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axes {list(axes)} repeat")
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(input)]
    return [d for i, d in enumerate(input) if i not in axes]


def tile(input: Sequence[int], repeats: Sequence[int]) -> Shape:
    if len(repeats) != len(input) or any(r < 0 for r in repeats):
        raise ShapeError(f"repeats {list(repeats)} do not fit an input of rank {len(input)}")
    return [DYNAMIC if d < 0 else d * r for d, r in zip(input, repeats)]


def pad(input: Sequence[int], pads: Sequence[int]) -> Shape:
    """`pads` is [d0_lo, d0_hi, d1_lo, d1_hi, ...], none negative."""
    if len(pads) != 2 * len(input) or any(p < 0 for p in pads):
        raise ShapeError(f"pads {list(pads)} must be 2 non-negative values per dim of {list(input)}")
    return [DYNAMIC if d < 0 else d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(input)]


def gather(input: Sequence[int], indices: Sequence[int], axis: int) -> Shape:
    _axis(axis, len(input))
    return [*input[:axis], *indices, *input[axis + 1 :]]


def split_sections(dim: int, *, parts: int | None = None, size: int | None = None) -> list[int]:
    """Sections of a split by count (must divide) or by size per part (the
    last part smaller when it does not divide)."""
    if parts is not None:
        if parts <= 0:
            raise ShapeError(f"a split into {parts} parts is not possible")
        if dim % parts:
            raise ShapeError(f"dimension {dim} does not divide into {parts} equal parts")
        return [dim // parts] * parts
    assert size is not None
    if size <= 0:
        raise ShapeError(f"a split into parts of size {size} is not possible")
    full, rest = divmod(dim, size)
    return [size] * full + ([rest] if rest else [])


def split(input: Sequence[int], axis: int, sections: Sequence[int]) -> list[Shape]:
    _axis(axis, len(input))
    if any(s < 0 for s in sections):
        raise ShapeError(f"sections {list(sections)} contain a negative size")
    if input[axis] >= 0 and sum(sections) != input[axis]:
        raise ShapeError(
            f"sections {list(sections)} sum to {sum(sections)}, but dimension {axis} has size {input[axis]}"
        )
    return [[s if i == axis else d for i, d in enumerate(input)] for s in sections]


def strided_slice(input: Sequence[int], axes, begin, end, strides) -> Shape:
    if len({len(axes), len(begin), len(end), len(strides)}) != 1:
        raise ShapeError("axes, begin, end and strides must have the same length")
    out = list(input)
    seen = set()
    for a, b, e, s in zip(axes, begin, end, strides):
        _axis(a, len(input))
        if a in seen:
            raise ShapeError(f"axis {a} is sliced twice")
        seen.add(a)
        if s <= 0:
            raise ShapeError(f"stride {s} on axis {a} must be positive")
        if not 0 <= b <= e or (input[a] >= 0 and e > input[a]):
            raise ShapeError(f"slice {b}:{e} on axis {a} is outside 0..{input[a]} or reversed")
        out[a] = len(range(b, e, s))
    return out


def matches(expected: Sequence[int], actual: Sequence[int]) -> bool:
    """Equal, a dynamic dim in either matching any size."""
    return len(expected) == len(actual) and all(_dim_eq(a, b) for a, b in zip(expected, actual))
