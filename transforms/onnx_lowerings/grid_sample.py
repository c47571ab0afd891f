"""ONNX `GridSample` (any number of spatial dims; nearest, linear, cubic;
zeros, border, reflection padding), as ONNX's reference computes it.

Each output position reads a few input positions (1 nearest, 2 linear, 4
cubic per spatial dim) that depend on the grid's values at run time, so the
input is laid out as a table of rows, one row of C channels per (batch,
position), and each tap is a gather of rows at indices computed
element-wise from the grid; taps are weighted and summed. Every index
computation is exact in float32 for inputs under 2^24 positions.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from xdsl.dialects.builtin import i32
from xdsl.ir import SSAValue

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}
_CUBIC_A = -0.75


def _cubic_weights(e: TirEmitter, t: SSAValue) -> list[SSAValue]:
    """Keys' cubic convolution weights of the four taps at offsets -1..2
    from floor(x), for t = x - floor(x) (A = -0.75, as ONNX and PyTorch)."""
    a = _CUBIC_A

    def near(d: SSAValue) -> SSAValue:  # |d| <= 1: ((a + 2)|d| - (a + 3))|d|^2 + 1
        inner = e.binary(BinaryFn.SUB, e.binary(BinaryFn.MUL, d, e.scalar(a + 2, d)), e.scalar(a + 3, d))
        return e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, e.binary(BinaryFn.MUL, inner, d), d), e.scalar(1, d))

    def far(d: SSAValue) -> SSAValue:  # 1 < |d| < 2: ((a|d| - 5a)|d| + 8a)|d| - 4a
        inner = e.binary(BinaryFn.SUB, e.binary(BinaryFn.MUL, d, e.scalar(a, d)), e.scalar(5 * a, d))
        inner = e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, inner, d), e.scalar(8 * a, d))
        return e.binary(BinaryFn.SUB, e.binary(BinaryFn.MUL, inner, d), e.scalar(4 * a, d))

    one_minus = e.binary(BinaryFn.SUB, e.scalar(1, t), t)
    return [
        far(e.binary(BinaryFn.ADD, t, e.scalar(1, t))),
        near(t),
        near(one_minus),
        far(e.binary(BinaryFn.SUB, e.scalar(2, t), t)),
    ]


def _reflect(e: TirEmitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    """x folded back into [lo, hi] by reflecting at the borders, as often as it takes."""
    span = hi - lo

    def fold(dx: SSAValue, near: float, far: float) -> SSAValue:
        times = e.floor(e.binary(BinaryFn.DIV, dx, e.scalar(span, dx)))
        rest = e.binary(BinaryFn.SUB, dx, e.binary(BinaryFn.MUL, times, e.scalar(span, dx)))
        odd = e.binary(BinaryFn.EQ, e.binary(BinaryFn.MOD, times, e.scalar(2, dx)), e.scalar(1, dx))
        sign = 1.0 if near < far else -1.0
        from_near = e.binary(BinaryFn.ADD, e.scalar(near, dx), e.binary(BinaryFn.MUL, rest, e.scalar(sign, dx)))
        from_far = e.binary(BinaryFn.SUB, e.scalar(far, dx), e.binary(BinaryFn.MUL, rest, e.scalar(sign, dx)))
        return e.where(odd, from_far, from_near)

    below = fold(e.binary(BinaryFn.SUB, e.scalar(lo, x), x), lo, hi)
    above = fold(e.binary(BinaryFn.SUB, x, e.scalar(hi, x)), hi, lo)
    low = e.binary(BinaryFn.LT, x, e.scalar(lo, x))
    high = e.binary(BinaryFn.GT, x, e.scalar(hi, x))
    return e.where(low, below, e.where(high, above, x))


def _clip(e: TirEmitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    return e.value(tir.ClipOp(x, lo, hi))


def _taps(e: TirEmitter, x: SSAValue, d: int, lo: float, hi: float, mode: str, padding: str):
    """One spatial dim's taps at coordinate `x` (in input positions, of a
    dim of `d`): each an index, a float of an integer inside the dim, and
    its weight (None: 1), zero for a tap outside under zeros padding."""
    if mode == "nearest":
        # the coordinate is integral (rounded, clipped or reflected to one): truncate as int32 would
        taps = [(x, None)]
    else:
        base = e.floor(x)
        t = e.binary(BinaryFn.SUB, x, base)
        if mode == "linear":
            weights = [e.binary(BinaryFn.SUB, e.scalar(1, t), t), t]
            offsets = [0, 1]
        else:
            weights = _cubic_weights(e, t)
            offsets = [-1, 0, 1, 2]
        taps = [
            (base if o == 0 else e.binary(BinaryFn.ADD, base, e.scalar(o, base)), w)
            for o, w in zip(offsets, weights)
        ]
    resolved = []
    for index, weight in taps:
        inside = None
        if padding == "zeros":
            ge = e.binary(BinaryFn.GE, index, e.scalar(0, index))
            le = e.binary(BinaryFn.LE, index, e.scalar(d - 1, index))
            inside = e.cast_like(e.binary(BinaryFn.AND, ge, le), index)
        elif padding == "reflection" and mode != "nearest":
            index = _reflect(e, index, lo, hi)
        index = _clip(e, index, 0.0, d - 1.0)
        if mode == "nearest" or padding == "reflection":  # int(...) truncates toward zero; here all >= 0
            index = e.floor(index)
        if inside is not None:
            weight = inside if weight is None else e.binary(BinaryFn.MUL, weight, inside)
        resolved.append((index, weight))
    return resolved


@lowers(onnx.GridSampleOp)
def _grid_sample(op: onnx.GridSampleOp, e: TirEmitter):
    shape = static_shape(op.X, e)
    grid_shape = static_shape(op.grid, e, "grid")
    mode = _MODES.get(op.mode.data)
    padding = op.padding_mode.data
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise e.error(f"mode '{op.mode.data}' with padding_mode '{padding}' is not a GridSample ONNX defines")
    n, c, dims = shape[0], shape[1], shape[2:]
    r = len(dims)
    out = grid_shape[1:-1]
    if grid_shape[-1] != r or grid_shape[0] != n:
        raise e.error(f"a grid of shape {grid_shape} does not sample an input of shape {shape}")
    align = bool(op.align_corners.value.data)
    grid = op.grid

    # each spatial dim's coordinate, in input positions (the grid lists the last dim first)
    coords = []
    for i, d in enumerate(dims):
        k = r - 1 - i
        g = e.slice(grid, [len(grid_shape) - 1], [k], [k + 1], [1])
        g = e.reshape(g, [n, *out])
        if align:  # (g + 1) / 2 * (d - 1)
            x = e.binary(BinaryFn.MUL, e.binary(BinaryFn.ADD, g, e.scalar(1, g)), e.scalar((d - 1) / 2, g))
        else:  # ((g + 1) * d - 1) / 2
            x = e.binary(BinaryFn.MUL, e.binary(BinaryFn.ADD, g, e.scalar(1, g)), e.scalar(d / 2, g))
            x = e.binary(BinaryFn.SUB, x, e.scalar(0.5, g))
        if mode == "nearest":
            x = e.round_half_even(x)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if padding == "border":  # only a coordinate beyond the border range moves (to the nearest pixel)
            outside = e.binary(BinaryFn.OR, e.binary(BinaryFn.LT, x, e.scalar(lo, x)),
                             e.binary(BinaryFn.GT, x, e.scalar(hi, x)))
            x = e.where(outside, _clip(e, x, 0.0, d - 1.0), x)
        elif padding == "reflection":
            x = _reflect(e, x, lo, hi)
        coords.append((x, d, lo, hi))

    # per dim: its taps, each an index (a float of an integer) and a weight
    taps_per_dim = [_taps(e, x, d, lo, hi, mode, padding) for x, d, lo, hi in coords]

    # the input as rows: (batch, positions...) x channels
    positions = math.prod(dims)
    rows = e.transpose(op.X, [0, *range(2, 2 + r), 1])
    rows = e.reshape(rows, [n * positions, c])
    strides = [math.prod(dims[i + 1:]) for i in range(r)]
    batch = e.constant((np.arange(n, dtype=np.float32) * positions).reshape([n] + [1] * len(out)))
    total = None
    for combo in itertools.product(*taps_per_dim):
        flat = batch
        weight = None
        for (index, w), stride in zip(combo, strides):
            flat = e.binary(BinaryFn.ADD, flat, e.binary(BinaryFn.MUL, index, e.scalar(stride, index)))
            if w is not None:
                weight = w if weight is None else e.binary(BinaryFn.MUL, weight, w)
        picked = e.gather(rows, e.value(tir.CastOp(flat, i32)), 0)  # [n, out..., c]
        if weight is not None:
            if dtypes.tensor(weight.type).element_type != dtypes.tensor(picked.type).element_type:
                weight = e.cast_like(weight, picked)
            w = e.reshape(weight, [n, *out, 1])
            picked = e.binary(BinaryFn.MUL, picked, w)
        total = picked if total is None else e.binary(BinaryFn.ADD, total, picked)
    assert total is not None
    rank = 2 + len(out)
    return [e.transpose(total, [0, rank - 1, *range(1, rank - 1)])]
