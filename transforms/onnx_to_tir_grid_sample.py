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
from forge_opt.transforms.lowering import Emitter, LoweringTable, static_shape
from forge_opt.transforms.onnx_to_tir_elementwise import binary, cast_like, constant, floor_of, scalar
from forge_opt.transforms.onnx_to_tir_quantize import round_half_even

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}
_CUBIC_A = -0.75


def _cubic_weights(e: Emitter, t: SSAValue) -> list[SSAValue]:
    """Keys' cubic convolution weights of the four taps at offsets -1..2
    from floor(x), for t = x - floor(x) (A = -0.75, as ONNX and PyTorch)."""
    a = _CUBIC_A

    def near(d: SSAValue) -> SSAValue:  # |d| <= 1: ((a + 2)|d| - (a + 3))|d|^2 + 1
        inner = binary(e, BinaryFn.SUB, binary(e, BinaryFn.MUL, d, scalar(e, a + 2, d)), scalar(e, a + 3, d))
        return binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, binary(e, BinaryFn.MUL, inner, d), d), scalar(e, 1, d))

    def far(d: SSAValue) -> SSAValue:  # 1 < |d| < 2: ((a|d| - 5a)|d| + 8a)|d| - 4a
        inner = binary(e, BinaryFn.SUB, binary(e, BinaryFn.MUL, d, scalar(e, a, d)), scalar(e, 5 * a, d))
        inner = binary(e, BinaryFn.ADD, binary(e, BinaryFn.MUL, inner, d), scalar(e, 8 * a, d))
        return binary(e, BinaryFn.SUB, binary(e, BinaryFn.MUL, inner, d), scalar(e, 4 * a, d))

    one_minus = binary(e, BinaryFn.SUB, scalar(e, 1, t), t)
    return [
        far(binary(e, BinaryFn.ADD, t, scalar(e, 1, t))),
        near(t),
        near(one_minus),
        far(binary(e, BinaryFn.SUB, scalar(e, 2, t), t)),
    ]


def _reflect(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    """x folded back into [lo, hi] by reflecting at the borders, as often as it takes."""
    span = hi - lo

    def fold(dx: SSAValue, near: float, far: float) -> SSAValue:
        times = floor_of(e, binary(e, BinaryFn.DIV, dx, scalar(e, span, dx)))
        rest = binary(e, BinaryFn.SUB, dx, binary(e, BinaryFn.MUL, times, scalar(e, span, dx)))
        odd = binary(e, BinaryFn.EQ, binary(e, BinaryFn.MOD, times, scalar(e, 2, dx)), scalar(e, 1, dx))
        sign = 1.0 if near < far else -1.0
        from_near = binary(e, BinaryFn.ADD, scalar(e, near, dx), binary(e, BinaryFn.MUL, rest, scalar(e, sign, dx)))
        from_far = binary(e, BinaryFn.SUB, scalar(e, far, dx), binary(e, BinaryFn.MUL, rest, scalar(e, sign, dx)))
        return e.value(tir.WhereOp(odd, from_far, from_near))

    below = fold(binary(e, BinaryFn.SUB, scalar(e, lo, x), x), lo, hi)
    above = fold(binary(e, BinaryFn.SUB, x, scalar(e, hi, x)), hi, lo)
    low = binary(e, BinaryFn.LT, x, scalar(e, lo, x))
    high = binary(e, BinaryFn.GT, x, scalar(e, hi, x))
    return e.value(tir.WhereOp(low, below, e.value(tir.WhereOp(high, above, x))))


def _clip(e: Emitter, x: SSAValue, lo: float, hi: float) -> SSAValue:
    return e.value(tir.ClipOp(x, lo, hi))


@lowers(onnx.GridSampleOp)
def _grid_sample(op: onnx.GridSampleOp, e: Emitter):
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
        g = e.value(tir.StridedSliceOp(grid, [len(grid_shape) - 1], [k], [k + 1], [1]))
        g = e.value(tir.ReshapeOp(g, [n, *out]))
        if align:  # (g + 1) / 2 * (d - 1)
            x = binary(e, BinaryFn.MUL, binary(e, BinaryFn.ADD, g, scalar(e, 1, g)), scalar(e, (d - 1) / 2, g))
        else:  # ((g + 1) * d - 1) / 2
            x = binary(e, BinaryFn.MUL, binary(e, BinaryFn.ADD, g, scalar(e, 1, g)), scalar(e, d / 2, g))
            x = binary(e, BinaryFn.SUB, x, scalar(e, 0.5, g))
        if mode == "nearest":
            x = round_half_even(e, x)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if padding == "border":  # only a coordinate beyond the border range moves (to the nearest pixel)
            outside = binary(e, BinaryFn.OR, binary(e, BinaryFn.LT, x, scalar(e, lo, x)),
                             binary(e, BinaryFn.GT, x, scalar(e, hi, x)))
            x = e.value(tir.WhereOp(outside, _clip(e, x, 0.0, d - 1.0), x))
        elif padding == "reflection":
            x = _reflect(e, x, lo, hi)
        coords.append((x, d, lo, hi))

    # per dim: its taps, each an index (a float of an integer) and a weight
    taps_per_dim = []
    for x, d, lo, hi in coords:
        if mode == "nearest":
            # the coordinate is integral (rounded, clipped or reflected to one): truncate as int32 would
            taps = [(x, None)]
        else:
            base = floor_of(e, x)
            t = binary(e, BinaryFn.SUB, x, base)
            if mode == "linear":
                weights = [binary(e, BinaryFn.SUB, scalar(e, 1, t), t), t]
                offsets = [0, 1]
            else:
                weights = _cubic_weights(e, t)
                offsets = [-1, 0, 1, 2]
            taps = [
                (base if o == 0 else binary(e, BinaryFn.ADD, base, scalar(e, o, base)), w)
                for o, w in zip(offsets, weights)
            ]
        resolved = []
        for index, weight in taps:
            inside = None
            if padding == "zeros":
                ge = binary(e, BinaryFn.GE, index, scalar(e, 0, index))
                le = binary(e, BinaryFn.LE, index, scalar(e, d - 1, index))
                inside = cast_like(e, binary(e, BinaryFn.AND, ge, le), index)
            elif padding == "reflection" and mode != "nearest":
                index = _reflect(e, index, lo, hi)
            index = _clip(e, index, 0.0, d - 1.0)
            if mode == "nearest" or padding == "reflection":  # int(...) truncates toward zero; here all >= 0
                index = floor_of(e, index)
            if inside is not None:
                weight = inside if weight is None else binary(e, BinaryFn.MUL, weight, inside)
            resolved.append((index, weight))
        taps_per_dim.append(resolved)

    # the input as rows: (batch, positions...) x channels
    positions = math.prod(dims)
    rows = e.value(tir.TransposeOp(op.X, [0, *range(2, 2 + r), 1]))
    rows = e.value(tir.ReshapeOp(rows, [n * positions, c]))
    strides = [math.prod(dims[i + 1:]) for i in range(r)]
    batch = constant(e, (np.arange(n, dtype=np.float32) * positions).reshape([n] + [1] * len(out)))
    total = None
    for combo in itertools.product(*taps_per_dim):
        flat = batch
        weight = None
        for (index, w), stride in zip(combo, strides):
            flat = binary(e, BinaryFn.ADD, flat, binary(e, BinaryFn.MUL, index, scalar(e, stride, index)))
            if w is not None:
                weight = w if weight is None else binary(e, BinaryFn.MUL, weight, w)
        picked = e.value(tir.GatherOp(rows, e.value(tir.CastOp(flat, i32)), 0))  # [n, out..., c]
        if weight is not None:
            if dtypes.tensor(weight.type).element_type != dtypes.tensor(picked.type).element_type:
                weight = cast_like(e, weight, picked)
            w = e.value(tir.ReshapeOp(weight, [n, *out, 1]))
            picked = binary(e, BinaryFn.MUL, picked, w)
        total = picked if total is None else binary(e, BinaryFn.ADD, total, picked)
    assert total is not None
    rank = 2 + len(out)
    return [e.value(tir.TransposeOp(total, [0, rank - 1, *range(1, rank - 1)]))]
